"""Tests of ``rota.core`` and what holds the whole tree together: states, job ids, stored
instants and their format, the SQL snapshots (``sql/``) and query plans, migrations,
schemas, retention, multi-host URLs, the import layers and the packaging.
"""
