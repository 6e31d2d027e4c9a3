"""The LISTEN connections' URL, and the probe that proves notifications arrive.

* ``--listen-db`` wins over ``ROTA_LISTEN_URL``; neither: LISTEN on the database URL;
* a listen URL takes the engine's schema, and must be PostgreSQL;
* on a direct connection rota sees no pooler, keeps psycopg's prepared statements,
  and both wake-up paths (executor ``Listener``, scheduler ``Wakeup``) find that
  their probe arrives and still wake on a real notification.

Through a real PgBouncer: tests/processes/test_pgbouncer.py.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, text

from rota.core.database import BadDatabaseSetting, behind_pooler, make_engine
from rota.core.listening import (
    listen_dsn,
    listen_url_given,
    resolve_listen_url,
    set_listen_url,
)
from rota.core.queries.jobs_notify import notify_claimable
from rota.core.queries.schedules import NOTIFY_CHANNEL
from rota.executor.listener import Listener
from rota.scheduler.wakeup import Wakeup
from tests.support.executor_support import wait_for

DIRECT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def test_the_flag_wins_over_the_environment() -> None:
    env = {"ROTA_LISTEN_URL": "postgresql://u@env:5432/d"}
    assert resolve_listen_url("postgresql://u@flag:5432/d", env) == (
        "postgresql+psycopg://u@flag:5432/d"
    )
    assert resolve_listen_url(None, env) == "postgresql+psycopg://u@env:5432/d"
    assert resolve_listen_url(" ", {}) is None


def test_a_listen_url_takes_the_engines_schema() -> None:
    engine = make_engine(DIRECT, schema="tenant_a")
    try:
        assert not listen_url_given(engine)
        set_listen_url(engine, "postgresql+psycopg://u:secret@direct:5432/d")
        assert listen_url_given(engine)
        dsn = listen_dsn(engine)
        assert dsn.startswith("postgresql://u:secret@direct:5432/d?")
        assert "search_path%3Dtenant_a" in dsn or "search_path=tenant_a" in dsn
    finally:
        engine.dispose()


def test_a_listen_url_must_be_postgresql() -> None:
    engine = make_engine(DIRECT)
    try:
        with pytest.raises(BadDatabaseSetting):
            set_listen_url(engine, "sqlite:///x.db")
    finally:
        engine.dispose()


def test_a_direct_connection_keeps_prepared_statements(pg_engine: Engine) -> None:
    with pg_engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        assert not behind_pooler(driver)
        assert driver.prepare_threshold == 5  # psycopg's default, unchanged


def test_the_executors_listener_probes_and_wakes_on_a_direct_connection(
    pg_engine: Engine,
) -> None:
    wake = threading.Event()
    listener = Listener(pg_engine, wake)
    listener.start()
    try:
        wait_for(lambda: listener.delivering is True, timeout=10, what="the probe")
        wake.clear()
        with pg_engine.begin() as conn:
            notify_claimable(conn)
        assert wake.wait(5)
    finally:
        listener.stop()


def test_the_schedulers_wakeup_probes_and_wakes_on_a_direct_connection(
    pg_engine: Engine,
) -> None:
    wakeup = Wakeup(pg_engine)
    stop = threading.Event()
    try:
        assert not wakeup.wait(0.3, stop)  # the probe is not a change of schedules
        wait_for(lambda: wakeup.wait(0.2, stop) or wakeup.delivering, 10, "the probe")
        assert wakeup.delivering is True
        with pg_engine.begin() as conn:
            conn.execute(text("SELECT pg_notify(:c, '')"), {"c": NOTIFY_CHANNEL})
        assert wakeup.wait(5, stop)
    finally:
        wakeup.close()
