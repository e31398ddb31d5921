"""The ``roboz`` command line (typer). Entry point: ``roboz.cli.app:main``."""
