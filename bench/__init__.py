"""Benchmarks: run with make targets; results go to bench/results/ as JSON and markdown."""
