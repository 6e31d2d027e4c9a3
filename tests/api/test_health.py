"""``--health-port``: /healthz of real processes, healthy and then really wedged.

A loop is wedged by holding a lock its next write needs: on PostgreSQL a row
lock on the process's own ``workers`` row (the heartbeat's / tick's registry
refresh waits on it), on SQLite the database's write lock (every write waits
for it). The probe answers 503 while the lock is held and 200 once the loop
comes round again; a process that is merely idle stays 200.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from rota.core.tables import workers
from tests.support.executor_support import REPO_ROOT, subprocess_env, wait_for

pytestmark = pytest.mark.slow

INTERVAL = "0.4"  # stuck after three: 1.2 s


def get(port: int, path: str = "/healthz") -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Proc:
    def __init__(self, db_url: str, tmp_path: Path, *argv: str) -> None:
        self.err = tmp_path / f"{argv[0]}.err"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rota.cli.main",
                    *argv,
                    "--log-format",
                    "json",
                    "--health-host",
                    "127.0.0.1",
                    "--health-port",
                    "0",
                    "--liveness-interval",
                    INTERVAL,
                ],
                cwd=REPO_ROOT,
                env=subprocess_env(db_url),
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.err.read_text().splitlines()]

    def port(self) -> int:
        def find() -> int | None:
            assert self.proc.poll() is None, self.err.read_text()
            found = [e["port"] for e in self.events() if e["event"] == "health_listening"]
            return found[0] if found else None

        port: int = wait_for(find, timeout=30, what="the health server")
        return port

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(10)


def _registered(engine: Engine, kind: str) -> str:
    def find() -> str | None:
        with engine.connect() as conn:
            row = conn.execute(select(workers.c.worker_id).where(workers.c.kind == kind)).first()
        return None if row is None else str(row[0])

    worker_id: str = wait_for(find, timeout=30, what=f"the {kind} to register")
    return worker_id


@contextmanager
def wedged(engine: Engine, worker_id: str) -> Iterator[None]:
    """Hold what the process's next registry refresh must wait for."""
    with engine.connect() as conn:
        trans = conn.begin()  # SQLite: BEGIN IMMEDIATE, the database's write lock
        try:
            if engine.dialect.name == "postgresql":
                conn.execute(
                    select(workers.c.worker_id)
                    .where(workers.c.worker_id == worker_id)
                    .with_for_update()
                )
            yield
        finally:
            trans.rollback()


def _status(port: int, want: int, stuck: str | None = None) -> dict[str, Any]:
    """Wait for this status (and, for 503, until the loop ``stuck`` is among the stuck)."""

    def check() -> dict[str, Any] | None:
        status, body = get(port)
        if status != want:
            return None
        if stuck is not None and stuck not in {s["loop"] for s in body["stuck"]}:
            return None
        return body

    body: dict[str, Any] = wait_for(check, timeout=20, what=f"/healthz to answer {want}")
    return body


def test_executor_healthz_fails_while_its_heartbeat_is_wedged(
    engine: Engine, db_url: str, tmp_path: Path, procs: list[Proc]
) -> None:
    p = Proc(db_url, tmp_path, "executor", "--poll-interval", "0.1")
    procs.append(p)
    port = p.port()
    worker_id = _registered(engine, "executor")
    assert _status(port, 200) == {"status": "ok", "loops": ["claim", "heartbeat"]}
    time.sleep(3 * float(INTERVAL) + 0.5)  # idle for longer than the allowance: still fine
    assert get(port)[0] == 200
    with wedged(engine, worker_id):
        body = _status(port, 503, stuck="heartbeat")
    assert body["status"] == "stuck"
    assert all(s["silent_seconds"] >= s["allowed_seconds"] for s in body["stuck"])
    _status(port, 200)  # the loop came round again
    assert get(port, "/nothing")[0] == 404
    assert p.stop() == 0


def test_scheduler_healthz_fails_while_its_tick_is_wedged(
    engine: Engine, db_url: str, tmp_path: Path, procs: list[Proc]
) -> None:
    p = Proc(db_url, tmp_path, "scheduler")
    procs.append(p)
    port = p.port()
    worker_id = _registered(engine, "scheduler")
    assert _status(port, 200)["loops"] == ["tick"]
    with wedged(engine, worker_id):
        body = _status(port, 503, stuck="tick")
    assert [s["loop"] for s in body["stuck"]] == ["tick"]
    _status(port, 200)
    assert p.stop() == 0


def test_run_watches_all_three_loops(
    engine: Engine, db_url: str, tmp_path: Path, procs: list[Proc]
) -> None:
    config = tmp_path / "schedules.yaml"
    config.write_text(
        "job_types:\n  t:\n    handler: tests.handlers.plain:noop\n"
        "schedules:\n  s:\n    job_type: t\n    every: 1h\n"
    )
    p = Proc(db_url, tmp_path, "run", "--config", str(config))
    procs.append(p)
    port = p.port()
    _registered(engine, "scheduler")
    _registered(engine, "executor")
    body = _status(port, 200)
    assert body["loops"] == ["claim", "heartbeat", "tick"]
    assert p.stop() == 0


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_busy_health_port_is_one_line_and_exit_1(db_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rota.cli.main",
                "executor",
                "--health-host",
                "127.0.0.1",
                "--health-port",
                str(port),
            ],
            cwd=REPO_ROOT,
            env=subprocess_env(db_url),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"rota: --health-port {port}: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
