"""`python -m kuiper ...` is the same as the `kuiper` command."""

from kuiper.tools.cli import main

raise SystemExit(main())
