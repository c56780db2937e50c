"""`python -m kuiper.tools.fuzz`: run a fuzzing campaign (see campaign.py)."""

import sys

from kuiper.tools.fuzz.cli import main

sys.exit(main())
