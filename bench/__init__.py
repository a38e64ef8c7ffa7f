"""Benchmarks for pageindex: `make bench` (full) and `make bench-quick`.

bench.run orchestrates; every measured tool runs in its own pinned subprocess (bench.worker,
bench.spark_worker) so that its peak RSS can be read on its own.
"""
