"""Start and stop, written once: the shape of every background service.

::

    class Beat(BackgroundLoop):
        def __init__(self) -> None:
            super().__init__("rota-beat", join_seconds=1.0)

        def _run(self) -> None:                 # in the service's own thread
            while not self._stop.wait(0.5):     # until stop() is called
                self.beat_once()

    beat = Beat()
    beat.start()
    beat.stop()       # ask the thread to end, wait up to join_seconds, release

Every rota loop that runs in threads of its own is a ``BackgroundLoop``: the
executor's worker slots, heartbeat, outcome writer, LISTEN connection, SQLite
watch, index upkeep and summary line, and the metrics flusher of every process. What
differs between them is the body of ``_run`` and three hooks:

* ``_interrupt()``: wake threads that block on something other than the stop
  event (a queue, a condition);
* ``_after_stop()``: release what the service holds (a connection, a last
  flush) once its threads have ended or the wait for them is over;
* ``join_seconds``: how long ``stop()`` waits. Threads are daemons: one that
  does not end in time (a handler that never returns, a statement lost in a
  silent network) is left behind, never waited for without bound.

Each loop keeps its tick-by-hand entry point (``beat_once``, ``flush_once``,
``check_once``...), so tests drive a pass without starting a thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Service(Protocol):
    """Anything a process starts when it starts and stops when it stops."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def spawn(target: Callable[[], object], name: str) -> threading.Thread:
    """Run ``target`` in a new daemon thread named ``name``, started."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


class BackgroundLoop:
    """A service run by ``threads`` daemon threads of its own, each running ``_run``.

    With one thread it is named ``name``; with several, ``name-0``, ``name-1``...
    """

    def __init__(self, name: str, *, join_seconds: float, threads: int = 1) -> None:
        self._name = name
        self._join_seconds = join_seconds
        self._thread_count = threads
        self._stop = threading.Event()  # set by stop(); ``_run`` waits on it between passes
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        count = self._thread_count
        self._threads = [
            spawn(self._run, self._name if count == 1 else f"{self._name}-{i}")
            for i in range(count)
        ]

    def stop(self) -> None:
        """Ask the threads to end, wait for them up to ``join_seconds``, then release."""
        self.signal_stop()
        self.join(self._join_seconds)
        self._after_stop()

    def signal_stop(self) -> None:
        """Ask the threads to end, without waiting for them."""
        self._stop.set()
        self._interrupt()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the threads; True when none is left running."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not self.alive

    @property
    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def _thread(self) -> threading.Thread | None:
        """The first (for most services the only) thread, once started."""
        return self._threads[0] if self._threads else None

    def _run(self) -> None:
        raise NotImplementedError

    def _interrupt(self) -> None:
        """Wake threads blocked elsewhere than on the stop event (none by default)."""

    def _after_stop(self) -> None:
        """Release what the service holds (nothing by default)."""
