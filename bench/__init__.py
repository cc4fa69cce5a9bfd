"""Benchmarks of the worker against the limits of issue 5; run them with `bench/run.py`."""
