"""`python -m kuiper.fuzz`: run a fuzzing campaign (see campaign.py)."""

import sys

from kuiper.cli.fuzz import main

sys.exit(main())
