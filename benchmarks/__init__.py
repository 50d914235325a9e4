"""Benchmarks: scale and latency measurements, each runnable as `python -m benchmarks.<name>`."""
