"""`python -m kuiper ...` is the same as the `kuiper` command."""

from kuiper.cli.main import main

raise SystemExit(main())
