"""Tests of the tools under ``bench/`` that are not processes of their own (the history
bench); the soak is in ``tests/processes``.
"""
