"""Benchmarks. Each module prints its figures; docs/benchmarks.md records them."""
