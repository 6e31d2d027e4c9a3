"""``rota executor`` with SQL counters, for ``bench_executor --probe``: never timed.

``python -m bench.executor_probe OUT.json executor --db URL ...`` runs the
ordinary ``rota`` command line and, when it returns, writes to ``OUT.json``
how many statements of each kind ran, the rows they returned or changed
(PostgreSQL; SQLite does not report rows before they are fetched), the time
they took as the client saw it (lock waits included), and the same for the
commits and for the pool's pre-ping ``SELECT 1`` at every checkout. Counting
hooks SQLAlchemy's engine events and wraps the dialect's commit and ping, so
the executor's code is exactly the one that ships.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.pool import Pool

from rota.cli.main import main as rota_main

# (a piece of the statement's text, its kind), most specific first
_KINDS = (
    ("pg_advisory_xact_lock", "claim: advisory lock"),
    ("WITH picked AS", "claim"),
    ("SET state = 'RUNNING'", "claim"),
    ("INSERT INTO job_attempts", "claim: open attempt rows (SQLite)"),
    ("WITH expired AS", "sweep"),
    ("'LEASE_EXPIRED'", "sweep"),
    ("WITH b AS", "outcome write"),
    ("UPDATE job_attempts", "outcome: close attempt rows (SQLite)"),
    ("b.target", "outcome write"),
    ("heartbeat_at", "heartbeat renew"),
    ("pg_notify", "notify"),
    ("job_types", "job type cache"),
    ("BEGIN IMMEDIATE", "BEGIN IMMEDIATE (SQLite)"),
)


def kind_of(statement: str) -> str:
    flat = " ".join(statement.split())
    for needle, kind in _KINDS:
        if needle in flat:
            return kind
    return "other: " + flat[:60]


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statements: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.seconds: dict[str, float] = {}
        self.checkouts = 0
        self.commits = 0
        self._started = threading.local()

    def add(self, kind: str, seconds: float, rows: int = 0) -> None:
        with self.lock:
            self.statements[kind] += 1
            self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
            if rows > 0:
                self.rows[kind] += rows

    def install(self) -> None:
        @event.listens_for(Engine, "before_cursor_execute")
        def _before(*_args: Any) -> None:
            self._started.at = time.perf_counter()

        @event.listens_for(Engine, "after_cursor_execute")
        def _after(
            _conn: Any, cursor: Any, statement: str, _params: Any, _ctx: Any, _many: bool
        ) -> None:
            elapsed = time.perf_counter() - self._started.at
            rowcount = getattr(cursor, "rowcount", -1)
            self.add(kind_of(statement), elapsed, rowcount if rowcount is not None else 0)

        @event.listens_for(Engine, "commit")
        def _commit(_conn: Any) -> None:
            with self.lock:
                self.commits += 1

        @event.listens_for(Pool, "checkout")
        def _checkout(_dbapi: Any, _record: Any, _proxy: Any) -> None:
            with self.lock:
                self.checkouts += 1

        # The round trips SQLAlchemy makes without a cursor event: time them too.
        def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(dialect: Any, dbapi_conn: Any) -> Any:
                started = time.perf_counter()
                try:
                    return method(dialect, dbapi_conn)
                finally:
                    self.add(name, time.perf_counter() - started)

            return wrapper

        commit = DefaultDialect.do_commit
        ping = DefaultDialect._do_ping_w_event
        DefaultDialect.do_commit = timed("COMMIT", commit)  # type: ignore[method-assign]
        DefaultDialect._do_ping_w_event = timed(  # type: ignore[method-assign]
            "pool pre-ping (SELECT 1)", ping
        )

    def to_json(self) -> dict[str, Any]:
        with self.lock:
            return {
                "statements": dict(self.statements),
                "rows": dict(self.rows),
                "seconds": dict(self.seconds),
                "checkouts": self.checkouts,
                "commits": self.commits,
            }


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    counters = Counters()
    counters.install()
    try:
        return rota_main(argv)
    finally:
        with open(out, "w") as f:
            json.dump(counters.to_json(), f)


if __name__ == "__main__":
    sys.exit(main())
