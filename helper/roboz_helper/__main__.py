"""`python -m roboz_helper` is the `roboz-helper` command."""

from roboz_helper.cli import main

raise SystemExit(main())
