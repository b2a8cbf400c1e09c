"""Test tooling: local S3 servers for the test suite and the benchmarks (not a stable API)."""
