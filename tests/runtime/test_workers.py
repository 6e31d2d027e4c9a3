"""The worker registry: every scheduler and executor process has a row while it runs.

* the statements: register, refresh, live until silent for three intervals,
  removed after a day, deregistered on a graceful exit;
* an executor and a scheduler replica register at start, refresh with their
  heartbeat / tick, and remove their row when they stop;
* ``rota workers`` and ``rota workers --json`` show them, live or gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from rota.cli.main import main
from rota.core.queries.workers import (
    WorkerInfo,
    deregister_worker,
    list_workers,
    live_worker_counts,
    refresh_worker,
    register_worker,
    remove_gone_workers,
)
from rota.core.states import WorkerKind
from rota.core.tables import workers
from rota.executor.service import Executor
from rota.scheduler.service import SchedulerService
from tests.support.executor_support import REPO_ROOT, run_in_thread, subprocess_env, wait_for

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


def _info(worker_id: str, kind: WorkerKind = WorkerKind.EXECUTOR, **kw: object) -> WorkerInfo:
    values: dict[str, object] = {
        "worker_id": worker_id,
        "kind": kind,
        "host": "h1",
        "pid": 123,
        "version": "0.2.0",
        "interval_seconds": 10.0,
    }
    if kind is WorkerKind.EXECUTOR:
        values.update(pools=("default", "reports"), concurrency=8)
    values.update(kw)
    return WorkerInfo(**values)  # type: ignore[arg-type]


def test_live_until_silent_for_three_intervals_then_removed_after_a_day(engine: Engine) -> None:
    with engine.begin() as conn:
        register_worker(conn, _info("e1"), now=T0)
        register_worker(conn, _info("s1", WorkerKind.SCHEDULER, interval_seconds=5.0), now=T0)
    with engine.connect() as conn:
        rows = {w.worker_id: w for w in list_workers(conn, now=T0 + timedelta(seconds=15))}
    assert rows["e1"].live and rows["e1"].pools == ("default", "reports")
    assert rows["e1"].concurrency == 8 and rows["e1"].started_at == T0
    assert rows["s1"].pools is None and rows["s1"].concurrency is None
    assert not rows["s1"].live, "silent for 15 s, three of its 5 s intervals: gone"
    assert rows["s1"].seen_seconds_ago == 15.0

    with engine.begin() as conn:  # one refresh keeps it live
        assert refresh_worker(conn, "s1", now=T0 + timedelta(seconds=16))
        assert not refresh_worker(conn, "nobody", now=T0)
    with engine.connect() as conn:
        counts = live_worker_counts(conn, now=T0 + timedelta(seconds=20))
        listed = [w.worker_id for w in list_workers(conn, now=T0 + timedelta(seconds=30))]
    assert counts == {WorkerKind.EXECUTOR: 1, WorkerKind.SCHEDULER: 1}
    assert listed == ["s1", "e1"], "live first, then gone"

    with engine.begin() as conn:
        assert remove_gone_workers(conn, now=T0 + timedelta(hours=23)) == 0
        assert remove_gone_workers(conn, now=T0 + timedelta(days=1, seconds=10)) == 1
    with engine.connect() as conn:
        assert [w.worker_id for w in list_workers(conn, now=T0)] == ["s1"]
    with engine.begin() as conn:
        assert deregister_worker(conn, "s1")
        assert not deregister_worker(conn, "s1")
    with engine.connect() as conn:
        assert list_workers(conn) == []


def test_registering_again_keeps_the_start_and_refreshes(engine: Engine) -> None:
    with engine.begin() as conn:
        register_worker(conn, _info("e1"), now=T0)
        register_worker(conn, _info("e1", concurrency=4), now=T0 + timedelta(minutes=5))
    with engine.connect() as conn:
        (row,) = list_workers(conn, now=T0 + timedelta(minutes=5))
    assert row.started_at == T0 and row.last_seen_at == T0 + timedelta(minutes=5)
    assert row.concurrency == 4 and row.live


def test_unknown_kind_and_bad_interval_are_refused_by_the_table(engine: Engine) -> None:
    row = {
        "worker_id": "x",
        "host": "h",
        "pid": 1,
        "version": "v",
        "started_at": T0,
        "last_seen_at": T0,
    }
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(workers.insert().values(**row, kind="poller", interval_seconds=1.0))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(workers.insert().values(**row, kind="executor", interval_seconds=0.0))


def _rows(engine: Engine) -> dict[str, dict[str, object]]:
    with engine.connect() as conn:
        return {r["worker_id"]: dict(r) for r in conn.execute(select(workers)).mappings()}


def test_executor_registers_refreshes_with_its_heartbeat_and_leaves(engine: Engine) -> None:
    ex, stop, thread = run_in_thread(
        engine, ("default", "reports"), 3, listen=False, liveness_interval=0.2, daemon=False
    )
    try:
        row = wait_for(lambda: _rows(engine).get(ex.worker_id), what="the executor's row")
        assert row["kind"] == "executor" and row["pid"] == os.getpid()
        assert row["pools"] == ["default", "reports"] and row["concurrency"] == 3
        assert row["interval_seconds"] == 0.2
        first_seen = row["last_seen_at"]
        wait_for(
            lambda: _rows(engine)[ex.worker_id]["last_seen_at"] != first_seen,
            what="a refresh of last_seen_at",
        )
    finally:
        stop.set()
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert ex.worker_id not in _rows(engine), "a graceful exit deregisters"


def test_scheduler_registers_refreshes_with_its_tick_and_leaves(engine: Engine) -> None:
    service = SchedulerService(engine, max_sleep=0.05, liveness_interval=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,))
    thread.start()
    try:
        row = wait_for(lambda: _rows(engine).get(service.worker_id), what="the scheduler's row")
        assert row["kind"] == "scheduler" and row["pools"] is None
        assert row["concurrency"] is None
        first_seen = row["last_seen_at"]
        wait_for(
            lambda: _rows(engine)[service.worker_id]["last_seen_at"] != first_seen,
            what="a refresh of last_seen_at",
        )
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert service.worker_id not in _rows(engine)


def test_rota_workers_lists_live_and_gone(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["workers", "--db", db_url]) == 0
    assert "0 live, 0 gone" in capsys.readouterr().out
    with engine.begin() as conn:
        register_worker(conn, _info("h1:10:aa"))  # now, by the database clock
        register_worker(conn, _info("h1:11:bb", WorkerKind.SCHEDULER), now=LONG_AGO)
    assert main(["workers", "--db", db_url]) == 0
    out = capsys.readouterr().out
    live_line = next(line for line in out.splitlines() if "h1:10:aa" in line)
    gone_line = next(line for line in out.splitlines() if "h1:11:bb" in line)
    assert live_line.startswith("live") and "default,reports" in live_line
    assert gone_line.startswith("gone") and "scheduler" in gone_line
    assert out.strip().endswith("1 live, 1 gone")
    assert main(["workers", "--db", db_url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(w["worker_id"], w["status"]) for w in listed] == [
        ("h1:10:aa", "live"),
        ("h1:11:bb", "gone"),
    ]
    assert listed[0]["pools"] == ["default", "reports"] and listed[1]["pools"] is None
    assert listed[1]["last_seen_at"] == "2020-01-01T00:00:00Z"


@pytest.mark.slow
def test_real_processes_live_gone_and_removed(engine: Engine, db_url: str, tmp_path: Path) -> None:
    """SIGKILL leaves a row that turns gone; SIGTERM removes the process's row."""

    def start(*argv: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{argv[0]}.log", "wb") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", *argv, "--liveness-interval", "0.3"],
                cwd=REPO_ROOT,
                env=subprocess_env(db_url),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def listed() -> dict[int, dict[str, Any]]:
        out = subprocess.run(
            [sys.executable, "-m", "rota.cli.main", "workers", "--json"],
            cwd=REPO_ROOT,
            env=subprocess_env(db_url),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {w["pid"]: w for w in json.loads(out)}

    def polled() -> dict[int, str]:
        with engine.connect() as conn:
            return {w.pid: "live" if w.live else "gone" for w in list_workers(conn)}

    executor = start("executor", "--pools", "a,b", "--concurrency", "2")
    scheduler = start("scheduler")
    try:
        wait_for(
            lambda: polled().keys() >= {executor.pid, scheduler.pid},
            timeout=60,
            what="both processes to register",
        )
        both = listed()
        assert both[executor.pid]["status"] == "live" and both[executor.pid]["kind"] == "executor"
        assert both[executor.pid]["pools"] == ["a", "b"]
        assert both[scheduler.pid]["status"] == "live"
        assert both[scheduler.pid]["kind"] == "scheduler"
        executor.send_signal(signal.SIGKILL)
        executor.wait(10)
        wait_for(lambda: polled()[executor.pid] == "gone", timeout=30, what="gone")
        assert polled()[scheduler.pid] == "live"
        scheduler.send_signal(signal.SIGTERM)
        assert scheduler.wait(30) == 0
        after = listed()
        assert scheduler.pid not in after, "a graceful exit removes the row"
        assert after[executor.pid]["status"] == "gone"
    finally:
        for p in (executor, scheduler):
            if p.poll() is None:
                p.kill()
                p.wait(10)


def test_a_running_process_removes_rows_gone_for_a_day(engine: Engine) -> None:
    with engine.begin() as conn:
        register_worker(conn, _info("old:1:aa"), now=LONG_AGO)
        register_worker(conn, _info("recent:1:bb"), now=None)
    ex = Executor(engine, listen=False, liveness_interval=0.1)
    ex.start()
    try:
        wait_for(lambda: "old:1:aa" not in _rows(engine), what="the long-gone row to go")
        assert "recent:1:bb" in _rows(engine) and ex.worker_id in _rows(engine)
    finally:
        ex.shutdown()
