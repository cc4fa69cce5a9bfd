"""Benchmarks of the worker against the targets in the README's "Performance".

Run them with `bench/run.py`.
"""
