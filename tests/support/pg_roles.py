"""A PostgreSQL login role of a test's own, with rota's privileges, dropped after."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url


@contextmanager
def login_role(url: str, prefix: str, also: Sequence[str] = ()) -> Iterator[str]:
    """The URL of a new role on ``url``'s database, granted every table and sequence.

    ``also``: more statements run as the admin after the grants, formatted with
    ``{role}`` and ``{database}`` (a REVOKE, say). At the end the role's sessions
    are ended and the role and what it owns dropped."""
    role = f"{prefix}_{uuid.uuid4().hex[:12]}"
    database = make_url(url).database
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
            conn.exec_driver_sql(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
            conn.exec_driver_sql(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
            for statement in also:
                conn.exec_driver_sql(statement.format(role=role, database=database))
        yield make_url(url).set(username=role).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{role}"')
        admin.dispose()
