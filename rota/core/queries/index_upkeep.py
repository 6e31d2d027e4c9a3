"""Bloated job-table indexes, found and rebuilt without blocking the queue (PostgreSQL).

Every job passes through the queue's partial indexes (QUEUED, RUNNING, ...)
and leaves them when it finishes. Its entries stay until VACUUM removes them,
and autovacuum comes by after a share of the *whole* table has changed (20%
by default): with ten million finished jobs kept, that is a million jobs
between two vacuums, and each of those indexes grows to hold all their
entries. VACUUM empties those pages again, but the file keeps them, and the
next entries go to those recycled pages, scattered through it. So an index
that holds no live entry, or a few, has the size of the history's churn:
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

import psycopg
from sqlalchemy import Connection, text

BLOAT_FACTOR = 4.0  # a fresh B-tree is ~90% full, one in use 50-90%: 4 x is waste
MIN_BLOATED_PAGES = 1024  # 8 MB: smaller waste is not worth a rebuild's two table scans
PAGE_BYTES = 8192
_PAGE_ROOM = (PAGE_BYTES - 24 - 16) * 0.90  # page header, B-tree special space, fill 90%
_TUPLE_HEADER = 8  # an index tuple's header, before its key data (8-byte aligned)
_LINE_POINTER = 4

# Any constant: one index rebuilder at a time over every executor (session-level lock).
UPKEEP_LOCK_KEY = 0x726F7461_726978  # "rota" "rix"

LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout ran out

# Per index: its size, the planner's entry count (the table's for an index of every
# row), the key's width from the column statistics (NULL if a column has none), and
# its predicate, the SQL PostgreSQL keeps for it.
_SIZES = text(
    """
    SELECT n.nspname AS schema, c.relname AS name, t.relname AS table_name,
           i.indisvalid AS valid,
           pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
           CASE WHEN i.indpred IS NULL THEN greatest(c.reltuples, t.reltuples)
                ELSE c.reltuples END AS entries,
           (SELECT CASE WHEN count(*) = count(s.avg_width) THEN sum(s.avg_width) END
              FROM unnest(i.indkey) AS k(attnum)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
              LEFT JOIN pg_stats s ON s.schemaname = n.nspname
                   AND s.tablename = t.relname AND s.attname = a.attname) AS width,
           pg_get_expr(i.indpred, i.indrelid) AS predicate,
           EXISTS (SELECT 1 FROM pg_stat_progress_create_index p
                    WHERE p.relid = t.oid) AS building
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
    entry_width: int | None  # key bytes per entry; None: a column has no statistics
    predicate: str | None = None  # a partial index's WHERE, as PostgreSQL keeps it
    building: bool = False  # an index of this table is being built right now

    @property
    def entry_bytes(self) -> int | None:
        if self.entry_width is None:
            return None
        return 8 * math.ceil((_TUPLE_HEADER + self.entry_width) / 8) + _LINE_POINTER

    def pages_for(self, entries: float) -> int | None:
        """Pages a fresh build of ``entries`` live entries takes (None: no width known)."""
        entry = self.entry_bytes
        if entry is None or entries < 0:
            return None
        return 1 + math.ceil(entries * entry / _PAGE_ROOM)

    @property
    def needed_pages(self) -> int | None:
        """Pages a fresh build of the live entries takes, by the statistics (None: unknown)."""
        return self.pages_for(self.entries)

    def bloated(
        self,
        factor: float = BLOAT_FACTOR,
        min_pages: int = MIN_BLOATED_PAGES,
        built_pages: int = 0,
        live_entries: float | None = None,
    ) -> bool:
        """Worth a rebuild: ``factor`` times the pages it needs, and ``min_pages`` at least.

        By the statistics, or by ``live_entries`` (counted) when given; an index
        whose key has a column without statistics is never judged. ``built_pages``,
        the size a rebuild of it last came to: where the estimate is off, an index
        is not rebuilt again until it outgrows that.
        """
        needed = self.pages_for(self.entries if live_entries is None else live_entries)
        return (
            self.valid
            and needed is not None
            and self.pages >= min_pages
            and self.pages > factor * max(needed, built_pages)
        )

    def entries_cap(self, factor: float = BLOAT_FACTOR) -> int:
        """Live entries enough to make this index's size not bloated: a count stops there."""
        entry = self.entry_bytes or 1
        return math.ceil(self.pages / factor * _PAGE_ROOM / entry) + 1

    @property
    def qualified(self) -> str:
        return f"{_quote(self.schema)}.{_quote(self.name)}"

    @property
    def qualified_table(self) -> str:
        return f"{_quote(self.schema)}.{_quote(self.table)}"


def index_sizes(conn: Connection) -> list[IndexSize]:
    """Every index of rota's job tables (in the search path's schema), largest first.

    An index dropped since the transaction's snapshot was taken (the old copy another
    executor's ``REINDEX CONCURRENTLY`` swapped out) has no file left, so no size
    (``pg_relation_size`` is NULL): it is left out."""
    rows = [r for r in conn.execute(_SIZES).mappings() if r["pages"] is not None]
    return [
        IndexSize(
            schema=r["schema"],
            name=r["name"],
            table=r["table_name"],
            valid=bool(r["valid"]),
            pages=int(r["pages"]),
            entries=float(r["entries"]),
            entry_width=None if r["width"] is None else int(r["width"]),
            predicate=r["predicate"],
            building=bool(r["building"]),
        )
        for r in rows
    ]


def live_entries(conn: Connection, index: IndexSize, cap: int) -> int:
    """The rows ``index`` holds an entry for, counted, up to ``cap``: what the statistics
    say is checked before a rebuild (stale or missing ones would rebuild a healthy index).
    The predicate is PostgreSQL's own text of it (``pg_get_expr``)."""
    where = f" WHERE {index.predicate}" if index.predicate else ""
    sql = f"SELECT count(*) FROM (SELECT 1 FROM {index.qualified_table}{where} LIMIT :cap) AS s"
    return int(conn.execute(text(sql), {"cap": cap}).scalar_one())


def upkeep_possible(conn: Connection) -> bool:
    """False on a standby or a read-only database: nothing may be rebuilt there."""
    return bool(
        conn.execute(
            text(
                "SELECT NOT pg_is_in_recovery() "
                "AND current_setting('transaction_read_only') = 'off'"
            )
        ).scalar()
    )


def backend_pid(conn: Connection) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def cancel_backend(libpq_url: str, pid: int, connect_timeout: float) -> None:
    """Cancel what server process ``pid`` runs, over a connection of its own.

    Not libpq's cancel request: psycopg sends that holding the GIL, with no
    timeout, and a silent network froze the whole process in it.
    """
    with psycopg.connect(
        libpq_url, autocommit=True, connect_timeout=max(1, math.ceil(connect_timeout))
    ) as conn:
        conn.execute("SELECT pg_cancel_backend(%s)", (pid,))


def leftover_copies(conn: Connection) -> list[IndexSize]:
    """Invalid copies a cancelled or failed REINDEX CONCURRENTLY left on the job tables.

    Only names PostgreSQL gives them (``_ccnew``, ``_ccold``, a digit or more
    after a clash) beside a valid index of the name they were made for, and
    only while no index of the table is being built (a rebuild of someone
    else's, under way): another invalid index is someone's own ``CREATE INDEX
    CONCURRENTLY`` and is not touched.
    """
    sizes = index_sizes(conn)
    valid = {(s.table, s.name) for s in sizes if s.valid}
    return [
        s
        for s in sizes
        if not s.valid
        and not s.building
        and (base := _rebuilt_name(s.name)) is not None
        and (s.table, base) in valid
    ]


def _rebuilt_name(name: str) -> str | None:
    """The index a rebuild copy named ``name`` was made for, or None."""
    for mark in ("_ccnew", "_ccold"):
        head, found, tail = name.rpartition(mark)
        if found and head and (tail == "" or tail.isdigit()):
            return head
    return None


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
