"""Tests of ``rota.executor`` in-process: statements and fences, claims and limits,
prefetch, retries and backoff, async and isolated handlers, hostile handlers and values,
handler modules failing at import, index upkeep.
"""
