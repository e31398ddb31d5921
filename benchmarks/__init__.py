"""Side-by-side measurements. Run all with ``python -m benchmarks`` (see ``--help``)."""
