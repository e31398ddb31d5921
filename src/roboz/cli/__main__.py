"""``python -m roboz.cli`` runs the same command line as the ``roboz`` executable."""

import sys

from roboz.cli.app import main

sys.exit(main())
