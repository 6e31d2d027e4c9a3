"""Bloated job-table indexes, found and rebuilt without blocking the queue (PostgreSQL).

Every job passes through the queue's partial indexes (QUEUED, RUNNING, ...)
and leaves them when it finishes. Its entries stay until VACUUM removes them,
and autovacuum comes by after a share of the *whole* table has changed (20%
by default): with ten million finished jobs kept, that is a million jobs
between two vacuums, and each of those indexes grows to hold all their
entries. VACUUM empties those pages again, but the file keeps them, and the
next entries go to those recycled pages, scattered through it. So an index
that holds a few hundred live entries has the size of the history's churn:
measured on a grown history of ten million finished jobs, ``ix_jobs_state``
35,657 pages, ``ix_jobs_unfinished_created`` 30,068, ``ix_jobs_claimable``
10,792, ``ix_jobs_leased`` 1,410; rebuilt, one page each, in 6.3 s for the
four (the table in memory).

``index_sizes`` reads each index of ``jobs`` and ``job_attempts`` from the
catalog: its size in pages, and the pages its live entries need (the
planner's entry count, ``reltuples``, times the width of an entry from the
column statistics, packed as a fresh build packs them, 90% full). An index is
bloated when it is ``BLOAT_FACTOR`` times that and at least
``MIN_BLOATED_PAGES``. ``rebuild_index`` runs ``REINDEX INDEX CONCURRENTLY``:
reads and writes of the table go on while it builds, and the new index
replaces the old one in one step. A rebuild that is cancelled or dies leaves
an invalid copy (``<name>_ccnew``), still kept up by every write:
``leftover_copies`` finds those and ``drop_leftover`` removes them.

All of this runs on an autocommit connection (REINDEX CONCURRENTLY cannot run
in a transaction), one rebuilder at a time across every process: the caller
takes ``try_upkeep_lock`` first. Rebuilding needs the table's owner (or,
from PostgreSQL 17, MAINTAIN); a user without it gets ``InsufficientPrivilege``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import Connection, text

BLOAT_FACTOR = 4.0  # a fresh B-tree is ~90% full, one in use 50-90%: 4 x is waste
MIN_BLOATED_PAGES = 1024  # 8 MB: smaller waste is not worth a rebuild's two table scans
PAGE_BYTES = 8192
_PAGE_ROOM = (PAGE_BYTES - 24 - 16) * 0.90  # page header, B-tree special space, fill 90%
_TUPLE_HEADER = 8  # an index tuple's header, before its key data (8-byte aligned)
_LINE_POINTER = 4
_UNKNOWN_WIDTH = 16  # a column without statistics

# Any constant: one index rebuilder at a time over every executor (session-level lock).
UPKEEP_LOCK_KEY = 0x726F7461_726978  # "rota" "rix"

TABLES = ("jobs", "job_attempts")

_SIZES = text(
    """
    SELECT n.nspname AS schema, c.relname AS name, t.relname AS table_name,
           i.indisvalid AS valid,
           pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
           c.reltuples AS entries,
           (SELECT coalesce(sum(coalesce(s.avg_width, :unknown_width)), :unknown_width)
              FROM unnest(i.indkey) AS k(attnum)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
              LEFT JOIN pg_stats s ON s.schemaname = n.nspname
                   AND s.tablename = t.relname AND s.attname = a.attname) AS width
      FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid
      JOIN pg_class t ON t.oid = i.indrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE i.indrelid IN (to_regclass('jobs'), to_regclass('job_attempts'))
     ORDER BY pages DESC, name
    """
)


@dataclass(frozen=True)
class IndexSize:
    schema: str
    name: str
    table: str
    valid: bool
    pages: int
    entries: float  # the planner's count; negative: never vacuumed nor analyzed
    entry_width: int  # bytes of key data per entry, from the column statistics

    @property
    def needed_pages(self) -> int | None:
        """Pages a fresh build of the live entries takes (None: no count yet)."""
        if self.entries < 0:
            return None
        entry = 8 * math.ceil((_TUPLE_HEADER + self.entry_width) / 8) + _LINE_POINTER
        return 1 + math.ceil(self.entries * entry / _PAGE_ROOM)

    def bloated(
        self,
        factor: float = BLOAT_FACTOR,
        min_pages: int = MIN_BLOATED_PAGES,
        built_pages: int = 0,
    ) -> bool:
        """Worth a rebuild: ``factor`` times the pages it needs, and ``min_pages`` at least.

        ``built_pages``, the size a rebuild of it last came to: where the
        estimate is off, an index is not rebuilt again until it outgrows that.
        """
        needed = self.needed_pages
        return (
            self.valid
            and needed is not None
            and self.pages >= min_pages
            and self.pages > factor * max(needed, built_pages)
        )

    @property
    def qualified(self) -> str:
        return f"{_quote(self.schema)}.{_quote(self.name)}"


def index_sizes(conn: Connection) -> list[IndexSize]:
    """Every index of rota's job tables (in the search path's schema), largest first."""
    rows = conn.execute(_SIZES, {"unknown_width": _UNKNOWN_WIDTH}).mappings()
    return [
        IndexSize(
            schema=r["schema"],
            name=r["name"],
            table=r["table_name"],
            valid=bool(r["valid"]),
            pages=int(r["pages"]),
            entries=float(r["entries"]),
            entry_width=int(r["width"]),
        )
        for r in rows
    ]


def leftover_copies(conn: Connection) -> list[IndexSize]:
    """Invalid copies a cancelled or failed REINDEX CONCURRENTLY left on the job tables.

    Only names PostgreSQL gives them (``_ccnew``, ``_ccold``, a digit or more
    after a clash): an invalid index of another name is someone's own
    ``CREATE INDEX CONCURRENTLY`` and is not touched.
    """
    return [
        s for s in index_sizes(conn)
        if not s.valid and _is_rebuild_copy(s.name)
    ]


def _is_rebuild_copy(name: str) -> bool:
    for mark in ("_ccnew", "_ccold"):
        head, found, tail = name.rpartition(mark)
        if found and head and (tail == "" or tail.isdigit()):
            return True
    return False


def upkeep_session(conn: Connection, lock_timeout_seconds: int) -> None:
    """The rebuilder's session: no statement timeout (a rebuild takes what it takes),
    and a lock timeout, so a rebuild waiting for old transactions gives up."""
    conn.execute(text(f"SET lock_timeout = '{int(lock_timeout_seconds)}s'"))
    conn.execute(text("SET statement_timeout = 0"))


def rebuild_index(conn: Connection, index: IndexSize) -> None:
    """``REINDEX INDEX CONCURRENTLY`` (an autocommit connection; takes minutes on a big table)."""
    conn.exec_driver_sql(f"REINDEX INDEX CONCURRENTLY {index.qualified}")


def drop_leftover(conn: Connection, index: IndexSize) -> None:
    """Drop an invalid rebuild copy without blocking the table (autocommit connection)."""
    conn.exec_driver_sql(f"DROP INDEX CONCURRENTLY IF EXISTS {index.qualified}")


def try_upkeep_lock(conn: Connection) -> bool:
    """Take the rebuilder's session lock if nobody holds it (held until the session ends)."""
    return bool(
        conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": UPKEEP_LOCK_KEY}).scalar()
    )


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
