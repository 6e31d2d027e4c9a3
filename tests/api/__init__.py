"""Tests of the HTTP side: the JSON API, the dashboard in a real browser, /metrics, the
FAILED counts and /healthz.
"""
