"""Fixtures: a fresh, migrated database per test, on SQLite and on PostgreSQL.

``db_url`` is parametrised over both backends; every test that asks for it (or
for ``engine``) runs twice. SQLite tests get a file under ``tmp_path``, copied
from a template file migrated once per session; PostgreSQL tests get their own
database cloned from a template database migrated once per session. Under
pytest-xdist each worker has its own templates (its own base temp directory, a
template database named for the worker), so workers share no file and no
database.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.core.database import make_engine
from rota.migrations.runner import upgrade
from tests.support import bytecode, ordering
from tests.support.db_support import (
    BACKENDS,
    PgClones,
    admin_connection,
    drop_database,
    migrated_sqlite_template,
    sqlalchemy_url,
    sqlite_copy_url,
)
from tests.support.executor_support import Executors, StartExecutor, alive, running_executors
from tests.support.pgserver_setup import postgres_for_tests
from tests.support.webhook_receiver import Receiver


def pytest_configure(config: pytest.Config) -> None:
    """The controller (or a run without workers) compiles bytecode for every process
    the tests start (``tests/support/bytecode.py``); xdist's workers inherit it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        config.stash[_PYCACHE] = bytecode.compile_for_children()


def pytest_unconfigure(config: pytest.Config) -> None:
    bytecode.remove(config.stash.get(_PYCACHE, None))


_PYCACHE = pytest.StashKey[set[Path] | None]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests spread over the workers' shares and first in each (see
    ``tests/support/ordering.py``): no worker is left with a queue of them at the end."""
    items[:] = ordering.balanced(items, ordering.workers())


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """The admin URL of this session's PostgreSQL (this worker's own server by default:
    see ``tests/support/pgserver_setup.py``)."""
    with postgres_for_tests() as url:
        yield url


@pytest.fixture(scope="session")
def pg_template(pg_admin_url: str) -> Iterator[str]:
    """A migrated template database, cloned for each PostgreSQL test."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"rota_tpl_{worker}_{os.getpid()}"
    with admin_connection(pg_admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    engine = make_engine(sqlalchemy_url(pg_admin_url, name))
    upgrade(engine)
    engine.dispose()
    yield name
    drop_database(pg_admin_url, name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each SQLite test (this worker's own)."""
    return migrated_sqlite_template(tmp_path_factory.mktemp("sqlite-template") / "rota.db")


@pytest.fixture(scope="session")
def pg_clones(pg_admin_url: str, pg_template: str) -> Iterator[PgClones]:
    """This worker's clones of its template: made one ahead, dropped in the background."""
    clones = PgClones(pg_admin_url, pg_template)
    yield clones
    clones.close()


@pytest.fixture
def fresh_pg_url(pg_admin_url: str, pg_clones: PgClones) -> Iterator[str]:
    """A migrated PostgreSQL database of this test's own (a clone no test used before)."""
    name = pg_clones.take()
    yield sqlalchemy_url(pg_admin_url, name)
    pg_clones.drop_later(name)


@pytest.fixture
def empty_pg_url(pg_admin_url: str, pg_clones: PgClones) -> Iterator[str]:
    """A PostgreSQL database with no schema at all (for migration tests)."""
    name = f"rota_e_{uuid.uuid4().hex[:16]}"
    with admin_connection(pg_admin_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield sqlalchemy_url(pg_admin_url, name)
    pg_clones.drop_later(name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a fresh, migrated database on the parametrised backend."""
    if backend == "sqlite":
        return sqlite_copy_url(request.getfixturevalue("sqlite_template"), tmp_path / "rota.db")
    return str(request.getfixturevalue("fresh_pg_url"))


@pytest.fixture
def empty_db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a database with no schema, on the parametrised backend."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    return str(request.getfixturevalue("empty_pg_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url, pool_size=10)
    yield eng
    eng.dispose()


@pytest.fixture
def pg_engine(fresh_pg_url: str) -> Iterator[Engine]:
    """An engine on a fresh, migrated PostgreSQL database, for PostgreSQL-only tests."""
    eng = make_engine(fresh_pg_url)
    yield eng
    eng.dispose()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """A long-running command run in-process configures logging for its process (root
    level and handler, thread hook, warnings): undo it, so later tests log as before."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    hook, showwarning = threading.excepthook, warnings.showwarning
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    threading.excepthook, warnings.showwarning = hook, showwarning


@pytest.fixture
def start_executor(engine: Engine) -> Iterator[StartExecutor]:
    """``start_executor(**options)`` runs an in-process Executor on ``engine`` in a
    thread (``poll_interval`` 0.05 s, ``sweep_interval`` 0.2 s unless given); every one
    started is stopped at the end."""
    with running_executors(engine) as start:
        yield start


@pytest.fixture
def executors(db_url: str, tmp_path: Path) -> Iterator[Executors]:
    """``rota executor`` processes on ``db_url``; whatever is left is killed at the end."""
    ex = Executors(db_url, tmp_path)
    yield ex
    ex.stop_all()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on a loopback port (``tests.support.webhook_receiver``),
    taken down at the end."""
    r = Receiver()
    yield r
    r.down()


@pytest.fixture
def pids() -> Iterator[list[int]]:
    """Pids a test saw; whatever of them still lives at the end is killed."""
    seen: list[int] = []
    yield seen
    for pid in seen:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
