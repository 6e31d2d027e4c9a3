"""Benchmarks: run as scripts, print their figures; never part of the test suite."""
