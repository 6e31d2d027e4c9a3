"""Write transactions of one executor process.

On SQLite every transaction takes the database's single write lock up front
(``BEGIN IMMEDIATE``). Threads of one process that wait for it inside SQLite
back off by sleeping (1, 2, 5, 10... ms), which wastes most of the time under
load; so the executor's own threads (claim loop, outcome writer, heartbeat,
sweeper) queue on a Python lock first and hand the write lock over at once.
Other processes still wait inside SQLite. On PostgreSQL there is no such lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine


class Transactions:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock() if engine.dialect.name == "sqlite" else None

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        if self._lock is None:
            with self.engine.begin() as conn:
                yield conn
            return
        with self._lock, self.engine.begin() as conn:
            yield conn
