"""Runnable examples: ``python -m roboz.examples.simple`` and ``.complex``."""
