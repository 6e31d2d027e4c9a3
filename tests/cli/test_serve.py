"""``rota serve`` and ``rota run``'s built-in server, as real processes.

The API itself is tested on both backends (``tests/api/test_http_api.py``); here the backend
matters only for ``rota serve`` with a token, the rest runs on SQLite.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support import loopback
from tests.support.api_support import rota_cmd, wait_healthy
from tests.support.db_support import migrated_sqlite_url
from tests.support.executor_support import REPO_ROOT, subprocess_env, wait_for

ADDRESS = re.compile(r"event=serve_started address=http://127\.0\.0\.1:(\d+)")


class Output:
    """Collects a process's stderr lines from a thread (so its pipe never fills)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = proc.stderr
        self._thread = threading.Thread(
            target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True
        )
        self._thread.start()

    def text(self) -> str:
        return "".join(self.lines)


@contextmanager
def process(
    args: list[str], env: dict[str, str], cwd: Path
) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    proc = subprocess.Popen(args, env=env, cwd=cwd, stderr=subprocess.PIPE, text=True)
    out = Output(proc)
    try:
        yield proc, out
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def port_of(out: Output, proc: subprocess.Popen[str]) -> int:
    def found() -> int | None:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {out.text()}")
        m = ADDRESS.search(out.text())
        return int(m.group(1)) if m else None

    port: int = wait_for(found, timeout=60, what="the server to start")
    return port


def test_serve_without_a_token_binds_only_loopback(tmp_path: Path) -> None:
    env = subprocess_env(f"sqlite:///{tmp_path / 'rota.db'}")
    env.pop("ROTA_API_TOKEN", None)
    r = subprocess.run(
        rota_cmd("serve", "--host", "0.0.0.0"), env=env, capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token: set ROTA_API_TOKEN" in r.stderr
    assert "Traceback" not in r.stderr


def sqlite_url(tmp_path: Path) -> str:
    """A migrated SQLite file: the process tests of what does not depend on the backend."""
    return migrated_sqlite_url(tmp_path / "rota.db")


def test_serve_reports_a_busy_port_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            rota_cmd("serve", "--port", str(port)),
            env=subprocess_env(sqlite_url(tmp_path)),
            capture_output=True,
            text=True,
        )
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("rota:")]
    assert errors == [f"rota: cannot serve on 127.0.0.1:{port}: Address already in use"]
    assert "Traceback" not in r.stderr


def test_serve_with_a_token_on_any_address(db_url: str, tmp_path: Path) -> None:
    env = subprocess_env(db_url, ROTA_API_TOKEN="t0ken")
    args = rota_cmd("serve", "--host", "127.0.0.1", "--port", "0")
    with process(args, env, tmp_path) as (proc, out):
        base = f"http://127.0.0.1:{port_of(out, proc)}"
        wait_healthy(base, proc=proc)
        with loopback.Client(base_url=base) as client:
            assert client.get("/readyz").status_code == 200
            assert client.get("/jobs").status_code == 401
            ok = client.get("/jobs", headers={"Authorization": "Bearer t0ken"})
            assert ok.status_code == 200 and ok.json() == {"jobs": [], "next": None}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert "t0ken" not in out.text()


SCHEDULE = """
job_types:
  hello:
    handler: tests.handlers.plain:noop
schedules: {}
"""


@pytest.mark.slow
def test_rota_run_serves_the_api_by_default(tmp_path: Path) -> None:
    (tmp_path / "schedules.yaml").write_text(SCHEDULE)
    env = subprocess_env(sqlite_url(tmp_path))
    env["PYTHONPATH"] = str(REPO_ROOT)
    # port 0: the port it took is in its serve_started line (a port probed free and
    # released could be taken meanwhile by another test's server)
    with process(rota_cmd("run", "--serve-port", "0"), env, tmp_path) as (proc, out):
        base = f"http://127.0.0.1:{port_of(out, proc)}"
        wait_healthy(base, timeout=60, proc=proc)
        with loopback.Client(base_url=base) as client:
            r = client.post("/jobs", json={"job_type": "hello"})
            assert r.status_code == 202
            location = r.headers["location"]
            wait_for(
                lambda: client.get(location).json()["state"] == "SUCCEEDED",
                timeout=30,
                what="the job to run",
            )
            assert "<title>rota</title>" in client.get("/").text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.slow
def test_rota_run_goes_on_without_serving_when_the_port_is_busy(tmp_path: Path) -> None:
    (tmp_path / "schedules.yaml").write_text(SCHEDULE)
    env = subprocess_env(sqlite_url(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with process(rota_cmd("run", "--serve-port", str(port)), env, tmp_path) as (proc, out):
            wait_for(lambda: "event=serve_skipped" in out.text(), timeout=60, what="the report")
            wait_for(lambda: "event=run_started" in out.text(), timeout=60, what="run to start")
            skipped = [line for line in out.lines if "serve_skipped" in line]
            assert len(skipped) == 1 and "Address already in use" in skipped[0]
            r = subprocess.run(
                rota_cmd("enqueue", "hello"), env=env, cwd=tmp_path, capture_output=True, text=True
            )
            assert r.returncode == 0, r.stderr
            job_id = r.stdout.strip()
            wait_for(
                lambda: (
                    "SUCCEEDED"
                    in subprocess.run(
                        rota_cmd("job", job_id),
                        env=env,
                        cwd=tmp_path,
                        capture_output=True,
                        text=True,
                    ).stdout
                ),
                timeout=30,
                what="the job to run",
            )
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    assert "Traceback" not in out.text()


@pytest.mark.slow
def test_rota_run_no_serve_binds_nothing(tmp_path: Path) -> None:
    (tmp_path / "schedules.yaml").write_text(SCHEDULE)
    # The port stays bound here, never listening (a connection is refused): no other
    # test's server can take it meanwhile, and a rota run that tried to serve on it
    # would say serve_skipped.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        args = rota_cmd("run", "--no-serve", "--serve-port", str(port))
        with process(args, subprocess_env(sqlite_url(tmp_path)), tmp_path) as (_, out):
            wait_for(lambda: "event=run_started" in out.text(), timeout=60, what="run to start")
            with pytest.raises(httpx.ConnectError):
                loopback.get(f"http://127.0.0.1:{port}/healthz")
            assert "serve_started" not in out.text()
            assert "serve_skipped" not in out.text()
