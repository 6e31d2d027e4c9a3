"""SQLite's ``INDEXED BY``: a statement that must read through one index, whatever the statistics.

SQLite's planner goes by its own estimates until someone runs ``ANALYZE`` (or
``PRAGMA optimize``) on the file, then by the statistics that leaves. For a
listing that reads the end of one index's range, those statistics can turn
the plan into reading every row of a state and sorting them: with
``ix_jobs_failed_recent``'s row in ``sqlite_stat1``, SQLite 3.40 read each
finished state of ``rota jobs`` through ``ix_jobs_finished`` and sorted it.
``indexed_by`` pins the index on SQLite; PostgreSQL, whose statistics
autovacuum keeps, plans as before. If the index cannot answer the statement,
SQLite refuses it ("no query solution") rather than reading the table.

SQLAlchemy's ``Select.with_hint`` carries the hint, but its SQLite compiler
renders no FROM hints: the ``Table`` compilation below adds it after the
table's name, where SQLite's grammar has it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Select, Table
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

_HINT = "INDEXED BY "
S = TypeVar("S", bound=Select[Any])


def indexed_by(stmt: S, table: Table, index: str) -> S:
    """``stmt`` reading ``table`` through ``index`` on SQLite (unchanged on PostgreSQL)."""
    if index not in {i.name for i in table.indexes}:
        raise ValueError(f"{table.name} has no index {index!r}")
    return stmt.with_hint(table, _HINT + index, dialect_name="sqlite")


@compiles(Table, "sqlite")
def _table_with_index_hint(element: Table, compiler: SQLCompiler, **kw: Any) -> str:
    rendered: str = compiler.visit_table(element, **kw)  # type: ignore[no-untyped-call]
    hint = (kw.get("fromhints") or {}).get(element)
    if kw.get("asfrom") and hint and hint.startswith(_HINT):
        rendered += " " + hint
    return rendered
