"""Job type specs, cached in the executor process.

Read from ``job_types`` at start, again every ``refresh_seconds``, and at once
when a claimed batch names a type the cache lacks (``ensure``). ``version``
counts the reads, so the executor rechecks its handlers' imports after each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from sqlalchemy import Engine

from rota.core.config import JobTypeSpec
from rota.core.queries.job_types import load_job_types


class JobTypeCache:
    def __init__(self, engine: Engine, refresh_seconds: float = 30.0) -> None:
        self._engine = engine
        self._refresh_seconds = refresh_seconds
        self._specs: dict[str, JobTypeSpec] = {}
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()
        self.version = 0  # how many times the types were read

    def refresh(self) -> None:
        with self._engine.connect() as conn:
            specs = load_job_types(conn)
            conn.rollback()
        with self._lock:
            self._specs = specs
            self._loaded_at = time.monotonic()
            self.version += 1

    def refresh_if_stale(self) -> None:
        if time.monotonic() - self._loaded_at > self._refresh_seconds:
            self.refresh()

    def ensure(self, names: Iterable[str]) -> None:
        """Read the types again now if any of ``names`` is missing (a type applied since)."""
        if any(n not in self._specs for n in names):
            self.refresh()

    def all(self) -> dict[str, JobTypeSpec]:
        """Every job type as last read."""
        return dict(self._specs)

    def get(self, name: str) -> JobTypeSpec | None:
        spec = self._specs.get(name)
        if spec is None and time.monotonic() - self._loaded_at > 1.0:
            self.refresh()
            spec = self._specs.get(name)
        return spec
