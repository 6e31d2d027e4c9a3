"""Tests of ``rota.runtime``: the worker registry and the log formats with their job fields."""
