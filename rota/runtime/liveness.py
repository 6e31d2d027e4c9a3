"""Whether a process's own loops still come round, for ``--health-port``.

Each long-running loop (the executor's claim loop and heartbeat, the
scheduler's tick) says ``passed(name)`` once per pass, whatever the pass did:
a loop that fails against an unreachable database still comes round and is
alive. A loop whose last pass is older than ``STUCK_AFTER_INTERVALS`` of its
interval is stuck: a deadlock, a hung statement, a handler that took the
process's lock. ``/healthz`` then answers 503 and a liveness probe restarts
the process. A loop that ended on purpose (shutdown) is ``unwatch``-ed first.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

STUCK_AFTER_INTERVALS = 3


@dataclass(frozen=True)
class Stuck:
    loop: str
    silent_seconds: float
    allowed_seconds: float


class Liveness:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loops: dict[str, tuple[float, float]] = {}  # name -> (interval, last pass)

    def watch(self, name: str, interval: float) -> None:
        """Start watching ``name``, which passes at least once per ``interval`` seconds."""
        with self._lock:
            self._loops[name] = (interval, time.monotonic())

    def unwatch(self, name: str) -> None:
        with self._lock:
            self._loops.pop(name, None)

    def passed(self, name: str) -> None:
        with self._lock:
            entry = self._loops.get(name)
            if entry is not None:
                self._loops[name] = (entry[0], time.monotonic())

    def stuck(self, mono: float | None = None) -> list[Stuck]:
        """The watched loops that have not passed for three of their intervals."""
        mono = time.monotonic() if mono is None else mono
        with self._lock:
            loops = dict(self._loops)
        found = []
        for name, (interval, last) in sorted(loops.items()):
            allowed = STUCK_AFTER_INTERVALS * interval
            if mono - last > allowed:
                found.append(Stuck(name, mono - last, allowed))
        return found

    def watched(self) -> list[str]:
        with self._lock:
            return sorted(self._loops)
