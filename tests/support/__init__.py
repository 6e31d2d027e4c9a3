"""Helpers shared by the tests (databases, executors, the API server, PostgreSQL clusters
and roles, plans, rules, log parsing, a frozen proxy). Not tests.
"""
