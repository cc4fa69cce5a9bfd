"""Benchmarks of the worker against the targets in docs/performance.md.

Run them with `bench/run.py`.
"""
