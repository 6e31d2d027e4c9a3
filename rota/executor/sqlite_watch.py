"""Fast wake-up on SQLite: notice commits of other connections.

SQLite has no NOTIFY. ``PRAGMA data_version`` changes whenever another
connection commits to the database file, and reading it takes no lock, so a
dedicated connection checks it every few milliseconds and sets the executor's
wake event on a change (a new job, a release, a sweep, a replay). The claim
that follows finds out whether anything became due; polling still covers jobs
whose ``run_after`` lies in the future.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from sqlalchemy import Engine

from rota.core.database import sqlite_file_path
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

CHECK_SECONDS = 0.005


class SqliteWatcher(BackgroundLoop):
    def __init__(self, engine: Engine, wake: threading.Event) -> None:
        super().__init__("rota-sqlite-watch", join_seconds=1.0)
        database = sqlite_file_path(engine.url)
        assert database, "an SQLite URL names a file"
        self._path = database
        self._wake = wake
        self._conn: sqlite3.Connection | None = None  # the watching thread's, once started
        self._baseline = 0

    def start(self) -> None:
        """Take the baseline version now, so no commit after ``start`` can be missed."""
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            self._baseline = _version(conn)
        except sqlite3.Error as exc:
            log.warning("cannot watch %s for commits, polling only: %s", self._path, exc)
            return
        self._conn = conn
        super().start()

    def _run(self) -> None:
        conn, last = self._conn, self._baseline
        assert conn is not None, "start() opened it"
        try:
            while not self._stop.wait(CHECK_SECONDS):
                try:
                    version = _version(conn)
                except sqlite3.Error:
                    continue  # busy for a moment: look again at the next check
                if version != last:
                    self._wake.set()
                    last = version
        finally:
            conn.close()


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])
