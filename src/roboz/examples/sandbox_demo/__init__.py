"""The sandbox demo: an agent works on files through guarded commands and runs a script in
the SafeScripts helper's sandbox. Run it with ``python -m roboz.examples.sandbox_demo``."""
