"""Alembic environment and versions: the only way rota's tables are made.

May import: ``rota.core`` only.
"""
