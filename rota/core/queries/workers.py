"""Statements on ``workers``: the registry of running scheduler and executor processes.

Each process inserts its row when it starts (``register_worker``), moves
``last_seen_at`` to the database clock once per ``interval_seconds`` with its
heartbeat or tick (``refresh_worker``: one statement per interval, nothing per
job) and deletes the row on a graceful exit (``deregister_worker``). A row not
refreshed for ``GONE_AFTER_INTERVALS`` of its own intervals is a gone process:
killed, frozen, or cut off from the database. Gone rows stay visible (an
operator wants to see what vanished) until ``remove_gone_workers`` deletes
those silent for ``REMOVE_AFTER``.

An executor's row also says which job types it cannot run because their
handler does not import there (``unavailable_job_types``, rewritten with each
refresh): ``live_by_pool`` and ``unavailable_handlers`` count the live rows
for ``GET /metrics``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite

from rota.core.queries.schedules import read_clock
from rota.core.sqltime import now_or_db
from rota.core.states import WorkerKind
from rota.core.tables import workers

GONE_AFTER_INTERVALS = 3
REMOVE_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class WorkerInfo:
    """What one process says about itself when it registers."""

    worker_id: str
    kind: WorkerKind
    host: str
    pid: int
    version: str
    interval_seconds: float
    pools: Sequence[str] | None = None  # executors only
    concurrency: int | None = None  # executors only


@dataclass(frozen=True)
class WorkerRow:
    """One registered process, as ``rota workers`` and the dashboard show it."""

    worker_id: str
    kind: WorkerKind
    host: str
    pid: int
    version: str
    pools: tuple[str, ...] | None
    concurrency: int | None
    started_at: datetime
    last_seen_at: datetime
    interval_seconds: float
    live: bool  # refreshed within GONE_AFTER_INTERVALS of its intervals
    seen_seconds_ago: float  # by the database clock
    unavailable_job_types: tuple[str, ...] = ()  # handlers that do not import there

    def to_json(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "kind": self.kind.value,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "pools": None if self.pools is None else list(self.pools),
            "concurrency": self.concurrency,
            "started_at": self.started_at.isoformat().replace("+00:00", "Z"),
            "last_seen_at": self.last_seen_at.isoformat().replace("+00:00", "Z"),
            "interval_seconds": self.interval_seconds,
            "status": "live" if self.live else "gone",
            "seen_seconds_ago": round(self.seen_seconds_ago, 3),
            "unavailable_job_types": list(self.unavailable_job_types),
        }


def register_worker(
    conn: Connection,
    info: WorkerInfo,
    *,
    now: datetime | None = None,
    unavailable: Collection[str] | None = None,
) -> None:
    """Insert this process's row, ``started_at = last_seen_at = now``.

    ``unavailable``: the job types whose handler does not import here (an executor).

    The id is fresh per process start, so a conflict only happens when a process
    registers again (its row was removed while it was cut off for a long time):
    then the row is refreshed and its description rewritten.
    """
    values: dict[str, Any] = {
        "worker_id": info.worker_id,
        "kind": info.kind.value,
        "host": info.host,
        "pid": info.pid,
        "version": info.version,
        "pools": None if info.pools is None else list(info.pools),
        "concurrency": info.concurrency,
        "interval_seconds": info.interval_seconds,
        "started_at": now_or_db(now),
        "last_seen_at": now_or_db(now),
        "unavailable_job_types": None if unavailable is None else sorted(unavailable),
    }
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(workers).values(**values)
    kept = ("worker_id", "started_at")
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[workers.c.worker_id],
            set_={k: getattr(stmt.excluded, k) for k in values if k not in kept},
        )
    )


def refresh_worker(
    conn: Connection,
    worker_id: str,
    *,
    now: datetime | None = None,
    unavailable: Collection[str] | None = None,
) -> bool:
    """``last_seen_at = now`` for this process; False when its row is no longer there.

    ``unavailable`` (not None) rewrites the job types whose handler does not import.
    """
    values: dict[str, Any] = {"last_seen_at": now_or_db(now)}
    if unavailable is not None:
        values["unavailable_job_types"] = sorted(unavailable)
    result = conn.execute(update(workers).where(workers.c.worker_id == worker_id).values(values))
    return result.rowcount == 1


def deregister_worker(conn: Connection, worker_id: str) -> bool:
    """Delete this process's row (a graceful exit); False when it was not there."""
    result = conn.execute(delete(workers).where(workers.c.worker_id == worker_id))
    return result.rowcount == 1


def remove_gone_workers(
    conn: Connection, *, older_than: timedelta = REMOVE_AFTER, now: datetime | None = None
) -> int:
    """Delete the rows not refreshed for ``older_than``; returns how many."""
    result = conn.execute(
        delete(workers).where(workers.c.last_seen_at < now_or_db(now, -older_than.total_seconds()))
    )
    return int(result.rowcount)


def list_workers(conn: Connection, *, now: datetime | None = None) -> list[WorkerRow]:
    """Every registered process, live ones first, then by kind, host and start."""
    clock = read_clock(conn, now)
    rows = conn.execute(select(workers)).mappings().all()
    found = []
    for r in rows:
        ago = (clock - r["last_seen_at"]).total_seconds()
        found.append(
            WorkerRow(
                worker_id=r["worker_id"],
                kind=WorkerKind(r["kind"]),
                host=r["host"],
                pid=r["pid"],
                version=r["version"],
                pools=None if r["pools"] is None else tuple(str(p) for p in r["pools"]),
                concurrency=r["concurrency"],
                started_at=r["started_at"],
                last_seen_at=r["last_seen_at"],
                interval_seconds=r["interval_seconds"],
                live=ago < GONE_AFTER_INTERVALS * r["interval_seconds"],
                seen_seconds_ago=max(0.0, ago),
                unavailable_job_types=_names(r["unavailable_job_types"]),
            )
        )
    found.sort(key=lambda w: (not w.live, w.kind.value, w.host, w.started_at, w.worker_id))
    return found


def _names(value: Any) -> tuple[str, ...]:
    """The stored list of names (JSON), or none when it is absent or not a list."""
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def live_by_pool(
    live: Sequence[WorkerRow], pools: Collection[str]
) -> dict[tuple[WorkerKind, str], int]:
    """Live processes per (kind, pool): an executor in each pool it serves, a scheduler in "".

    Every pool of ``pools`` is present for executors (0: no live executor
    serves it), and schedulers always are.
    """
    counts: dict[tuple[WorkerKind, str], int] = {(WorkerKind.SCHEDULER, ""): 0}
    for pool in pools:
        counts[(WorkerKind.EXECUTOR, pool)] = 0
    for w in live:
        if w.kind is WorkerKind.EXECUTOR:
            for pool in set(w.pools or ()):
                counts[(w.kind, pool)] = counts.get((w.kind, pool), 0) + 1
        else:
            counts[(w.kind, "")] = counts.get((w.kind, ""), 0) + 1
    return counts


def unavailable_handlers(live: Sequence[WorkerRow]) -> dict[str, int]:
    """For each job type some live executor cannot import: how many such executors."""
    counts: dict[str, int] = {}
    for w in live:
        for name in set(w.unavailable_job_types):
            counts[name] = counts.get(name, 0) + 1
    return counts


def live_worker_counts(conn: Connection, *, now: datetime | None = None) -> dict[WorkerKind, int]:
    """How many processes of each kind are live (every kind present, 0 included)."""
    counts = dict.fromkeys(WorkerKind, 0)
    for w in list_workers(conn, now=now):
        if w.live:
            counts[w.kind] += 1
    return counts
