"""Hints for SQLite's planner: a read that must follow one index, whatever the statistics.

SQLite's planner goes by its own estimates until someone runs ``ANALYZE`` (or
``PRAGMA optimize``) on the file, then by the statistics that leaves. For a
listing that reads the end of one index's range, those statistics can turn
the plan into reading every row of a state and sorting them: with
``ix_jobs_failed_recent``'s row in ``sqlite_stat1``, SQLite 3.40 reads each
finished state of ``rota jobs`` through ``ix_jobs_finished`` and sorts it.
``indexed_by`` pins the index on SQLite; PostgreSQL, whose statistics
autovacuum keeps, gets no hint and plans on its own. If the index cannot
answer the statement, SQLite refuses it ("no query solution") rather than
reading the table.

SQLAlchemy's ``Select.with_hint`` carries the hint, but its SQLite compiler
renders no FROM hints: the ``Table`` compilation below adds it after the
table's name, where SQLite's grammar has it.

The index pinned, SQLite still picks which term bounds its range. A listing
part says ``state IN (...)`` (the partial index's predicate, which SQLite must
see to use the index) and ``state = ?``; if SQLite takes the IN, whose several
ranges are not in the listing's order, it reads and sorts the whole state.
Which term it takes follows the statistics, and no plain form holds in every
case (SQLite 3.40, measured in ``tests/core/test_listing_plans.py``):

* bare terms: right without statistics, wrong once ``ANALYZE`` has seen a
  single state in the index (no job failed yet): both terms then look alike;
* ``unlikely(state = ?)`` alone: right with those statistics, wrong without any
  (every installation that never ran ``ANALYZE``);
* ``likely(state IN (...)) AND unlikely(state = ?)``: right in all of them.

So ``broad`` marks the predicate as true of most rows and ``selective`` the
equality as true of few (SQLite's ``likely()`` and ``unlikely()``, which change
the planner's estimates, never a result); elsewhere both are the bare
condition, parenthesised.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Boolean, ColumnElement, Select, Table, TextClause
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

_HINT = "INDEXED BY "
S = TypeVar("S", bound=Select[Any])


def indexed_by(stmt: S, table: Table, index: str) -> S:
    """``stmt`` reading ``table`` through ``index`` on SQLite (no hint on PostgreSQL)."""
    if index not in {i.name for i in table.indexes}:
        raise ValueError(f"{table.name} has no index {index!r}")
    if table not in stmt.get_final_froms():  # an alias of it would be read without the hint
        raise ValueError(f"the statement does not read {table.name} itself")
    return stmt.with_hint(table, _HINT + index, dialect_name="sqlite")


@compiles(Table, "sqlite")
def _table_with_index_hint(element: Table, compiler: SQLCompiler, **kw: Any) -> str:
    rendered: str = compiler.visit_table(element, **kw)  # type: ignore[no-untyped-call]
    hint = (kw.get("fromhints") or {}).get(element)
    if kw.get("asfrom") and hint and hint.startswith(_HINT):
        rendered += " " + hint
    return rendered


class _Likelihood(FunctionElement[bool]):
    """A condition, with SQLite's planner told how often it holds; as it is elsewhere."""

    type = Boolean()
    inherit_cache = True
    _is_implicitly_boolean = True  # a condition: SQLite gets no "= 1" after it
    sqlite_function = ""  # SQLite's name for the hint

    def __init__(self, condition: ColumnElement[bool] | TextClause) -> None:
        super().__init__(condition)


class broad(_Likelihood):
    """``condition``, which SQLite's planner is told most rows meet (``likely()``)."""

    inherit_cache = True  # SQLAlchemy asks it of every subclass
    sqlite_function = "likely"


class selective(_Likelihood):
    """``condition``, which SQLite's planner is told few rows meet (``unlikely()``)."""

    inherit_cache = True
    sqlite_function = "unlikely"


@compiles(_Likelihood)
def _likelihood(element: _Likelihood, compiler: SQLCompiler, **kw: Any) -> str:
    return f"({compiler.process(element.clauses, **kw)})"


@compiles(_Likelihood, "sqlite")
def _likelihood_sqlite(element: _Likelihood, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{element.sqlite_function}({compiler.process(element.clauses, **kw)})"
