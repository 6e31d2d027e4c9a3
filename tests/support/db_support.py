"""Test databases: a copy of a migrated SQLite file, a clone of the migrated PostgreSQL
template.

The fixtures of ``conftest.py`` give one per test, each copied or cloned from a
template migrated once per session (per xdist worker: every worker has its own
template file under its own base temp, and its own template database); a module
whose tests only read a large data set builds it once in a module-scoped fixture
with these.

PostgreSQL clones are made one ahead and dropped behind, in threads of their own
(``PgClones``): on PostgreSQL 15 every DROP DATABASE forces an immediate checkpoint
and waits for it, 1 to 2.5 s on a busy two-core machine, longer than most tests.
Dropped several at once, the clones share one checkpoint.
"""

from __future__ import annotations

import queue
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from rota.core.database import make_engine
from rota.migrations.runner import upgrade

BACKENDS = ["sqlite", "postgresql"]  # every database test runs on each


def sqlalchemy_url(libpq_url: str, dbname: str) -> str:
    """The SQLAlchemy URL of database ``dbname`` on the server of ``libpq_url``."""
    u = make_url(libpq_url).set(drivername="postgresql+psycopg", database=dbname)
    return u.render_as_string(hide_password=False)


def admin_connection(libpq_url: str) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection for CREATE and DROP DATABASE."""
    return psycopg.connect(libpq_url, autocommit=True)


def create_clone_sql(conn: psycopg.Connection[tuple[object, ...]], name: str, template: str) -> str:
    """CREATE DATABASE ``name`` as a copy of ``template``. From PostgreSQL 15 on, a copy
    of the files (``STRATEGY FILE_COPY``): about half the server's CPU of the default,
    which writes every block of a small template through the WAL; its checkpoints cost
    little on the test servers, which run with ``fsync=off``."""
    sql = f'CREATE DATABASE "{name}" TEMPLATE "{template}"'
    if conn.info.server_version >= 150000:
        sql += " STRATEGY FILE_COPY"
    return sql


@contextmanager
def cloned_pg_database(pg_admin_url: str, pg_template: str) -> Iterator[str]:
    """A fresh migrated PostgreSQL database (a clone of the template), dropped afterwards."""
    name = f"rota_t_{uuid.uuid4().hex[:16]}"
    with admin_connection(pg_admin_url) as conn:
        conn.execute(create_clone_sql(conn, name, pg_template))
    try:
        yield sqlalchemy_url(pg_admin_url, name)
    finally:
        drop_database(pg_admin_url, name)


class PgClones:
    """Clones of one migrated template database, one per test, each used once.

    ``take()`` returns the name of a clone made ahead (while the previous test ran);
    ``drop_later(name)`` hands one back, dropped in the background with whatever else
    was handed back meanwhile (up to ``batch`` at once: one checkpoint for them all);
    ``close()`` drops every clone left and waits. A failed CREATE is raised by the next
    ``take()``; a failed DROP by ``close()``.
    """

    def __init__(self, admin_url: str, template: str, ahead: int = 1, batch: int = 10) -> None:
        self.admin_url = admin_url
        self.template = template
        self.batch = batch
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=ahead)
        self._dropping: queue.Queue[str | None] = queue.Queue()
        self._closing = threading.Event()
        self._drop_errors: list[BaseException] = []
        self._maker = threading.Thread(target=self._make, name="pg-clones-make", daemon=True)
        self._dropper = threading.Thread(target=self._drop, name="pg-clones-drop", daemon=True)
        self._maker.start()
        self._dropper.start()

    def take(self) -> str:
        try:
            item = self._ready.get(timeout=300)
        except queue.Empty:
            raise RuntimeError("no PostgreSQL clone made within 300 s") from None
        if isinstance(item, BaseException):
            self._ready.put(item)  # every later take fails the same way
            raise RuntimeError(f"cloning {self.template} failed: {item}") from item
        return item

    def drop_later(self, name: str) -> None:
        self._dropping.put(name)

    def close(self) -> None:
        self._closing.set()
        self._maker.join()
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, str):
                self._dropping.put(item)
        self._dropping.put(None)
        self._dropper.join()
        if self._drop_errors:
            raise RuntimeError(f"dropping test databases failed: {self._drop_errors}")

    def _make(self) -> None:
        with admin_connection(self.admin_url) as conn:
            while not self._closing.is_set():
                name = f"rota_t_{uuid.uuid4().hex[:16]}"
                try:
                    conn.execute(create_clone_sql(conn, name, self.template))
                except BaseException as exc:
                    self._ready.put(exc)
                    return
                while True:
                    try:
                        self._ready.put(name, timeout=0.2)
                        break
                    except queue.Full:
                        if self._closing.is_set():
                            self._dropping.put(name)
                            return

    def _drop(self) -> None:
        with ThreadPoolExecutor(self.batch, thread_name_prefix="pg-clones-drop") as pool:
            while True:
                first = self._dropping.get()
                if first is None:
                    return
                names, last = [first], False
                while len(names) < self.batch:  # whatever else is waiting: one checkpoint
                    try:
                        more = self._dropping.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        last = True
                        break
                    names.append(more)
                for future in [pool.submit(self._drop_one, name) for name in names]:
                    exc = future.exception()
                    if exc is not None:
                        self._drop_errors.append(exc)
                if last:
                    return

    def _drop_one(self, name: str) -> None:
        drop_database(self.admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """DROP DATABASE ... WITH (FORCE), again while a process that outlived its test
    (a failed test's executor thread, say) connects anew between the forced end of
    its sessions and the drop."""
    for attempt in range(10):
        try:
            with admin_connection(admin_url) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except psycopg.errors.ObjectInUse:
            if attempt == 9:
                raise
            time.sleep(0.5)


def migrated_sqlite_url(path: Path) -> str:
    """The URL of a new SQLite file at ``path``, migrated to the newest schema."""
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def migrated_sqlite_template(path: Path) -> Path:
    """Migrate a new SQLite file at ``path`` to be copied for each test.

    The WAL is checkpointed into the file and truncated, so the file alone is the
    whole database (a copy of it needs nothing else)."""
    migrated_sqlite_url(path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def sqlite_copy_url(template: Path, path: Path) -> str:
    """The URL of a copy of the migrated ``template`` at ``path`` (well under 1 ms,
    where migrating a new file takes about 0.3 s)."""
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"
