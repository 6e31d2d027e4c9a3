"""Tests of ``rota.producer``: enqueue in the caller's transaction, its args, deduplication
and backpressure.
"""
