"""The ``Host`` header is checked on every route: a name rota was not told about (what a
DNS-rebinding page sends) gets 421 problem+json, reads and probes included.

Loopback serves answer for localhost names and addresses; ``--allowed-host`` (or
``ROTA_ALLOWED_HOSTS``) names others; a wildcard bind (0.0.0.0, ::) needs a token
and then answers any Host, since a rebinding page has no token to send.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from rota.api.problems import PROBLEM_JSON
from tests.api.surface import rota_serve, serve_refused
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.db_support import migrated_sqlite_url
from tests.support.executor_support import job_type, store_types

TOKEN = "s3cret-token"
ROUTES = (
    ("GET", "/jobs"),
    ("GET", "/schedules"),
    ("GET", "/dashboard/data"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/nowhere"),
    ("POST", "/jobs"),
)


def misdirected(r: httpx.Response) -> None:
    assert r.status_code == 421, (r.request.url, r.request.headers.get("host"), r.text)
    assert r.headers["content-type"] == PROBLEM_JSON
    assert "job_type" not in r.text and "jobs" not in r.json()
    assert "--allowed-host" in r.json()["detail"]


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
def test_a_foreign_host_is_refused_on_every_route(engine: Engine, token: str | None) -> None:
    store_types(engine, job_type("t"))
    auth = {"Authorization": f"Bearer {TOKEN}"} if token else {}
    with running_api(engine, token=token) as base, loopback.Client(base_url=base, timeout=10) as c:
        port = base.rsplit(":", 1)[1]
        for host in (
            "evil.example",
            f"evil.example:{port}",
            f"127.0.0.1.nip.io:{port}",
            f"localhost.evil.example:{port}",
            "10.0.0.1",
            f"[::2]:{port}",
        ):
            for method, path in ROUTES:
                headers = {"Host": host, "Accept": "text/html", **auth}
                misdirected(c.request(method, path, json={"job_type": "t"}, headers=headers))
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LocalHost", f"[::1]:{port}"):
            r = c.get("/jobs", headers={"Host": host, **auth})
            assert r.status_code == 200, (host, r.text)


def test_a_request_without_host_is_refused(engine: Engine) -> None:
    with running_api(engine) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /jobs HTTP/1.0\r\n\r\n")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == b"421", answer[:200]


def test_allowed_hosts_name_what_a_loopback_serve_answers_for(tmp_path: Path) -> None:
    db = migrated_sqlite_url(tmp_path / "rota.db")
    names = ("--allowed-host", "rota.test,Ops.Example", "--allowed-host", "third.test")
    with rota_serve(db, tmp_path, *names) as s, loopback.Client(base_url=s.base) as c:
        for host in ("rota.test", f"ops.example:{s.port}", "third.test:1", f"127.0.0.1:{s.port}"):
            assert c.get("/jobs", headers={"Host": host}).status_code == 200, host
        misdirected(c.get("/jobs", headers={"Host": "evil.example"}))
    with rota_serve(db, tmp_path, env={"ROTA_ALLOWED_HOSTS": "rota.test, ops.example"}) as s:
        assert loopback.get(f"{s.base}/jobs", headers={"Host": "ops.example"}).status_code == 200
        misdirected(loopback.get(f"{s.base}/jobs", headers={"Host": "evil.example"}))


def test_a_wildcard_bind_with_a_token_answers_any_host(tmp_path: Path) -> None:
    """A rebinding page reaches it under any name, but has no token: 401, never data."""
    db = migrated_sqlite_url(tmp_path / "rota.db")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    env = {"ROTA_API_TOKEN": TOKEN}
    with (
        rota_serve(db, tmp_path, "--host", "0.0.0.0", env=env) as s,
        loopback.Client(base_url=s.base) as c,
    ):
        r = c.get("/jobs", headers={"Host": "evil.example"})
        assert r.status_code == 401 and "jobs" not in r.json()
        assert c.get("/jobs", headers={"Host": "rota.internal", **auth}).status_code == 200
        assert c.get("/healthz", headers={"Host": "10.1.2.3:8080"}).status_code == 200
    with rota_serve(db, tmp_path, "--host", "0.0.0.0", "--allowed-host", "rota.test", env=env) as s:
        misdirected(loopback.get(f"{s.base}/jobs", headers={"Host": "evil.example", **auth}))
        assert (
            loopback.get(f"{s.base}/jobs", headers={"Host": "rota.test", **auth}).status_code == 200
        )


@pytest.mark.parametrize(
    "value",
    ["http://rota.test", "rota.test/path", "rota.test:8080", "", "a b", "user@rota.test"],
)
def test_a_bad_allowed_host_is_refused_at_start(tmp_path: Path, value: str) -> None:
    db = migrated_sqlite_url(tmp_path / "rota.db")
    r = serve_refused(db, tmp_path, "--allowed-host", value, env={})
    assert r.returncode == 2, r.stderr
    assert "--allowed-host" in r.stderr and "Traceback" not in r.stderr


def test_rota_run_takes_allowed_hosts(tmp_path: Path) -> None:
    import subprocess

    from tests.api.surface import ADDRESS, Output
    from tests.support.api_support import rota_cmd
    from tests.support.executor_support import subprocess_env, wait_for

    (tmp_path / "schedules.yaml").write_text("job_types:\n  t: {handler: 'm:f'}\nschedules: {}\n")
    env = subprocess_env(f"sqlite:///{tmp_path / 'rota.db'}")
    env.pop("ROTA_API_TOKEN", None)
    args = rota_cmd("run", "--serve-port", "0", "--allowed-host", "rota.test")
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    out = Output(proc)
    try:
        m = wait_for(lambda: ADDRESS.search(out.text()), timeout=60, what="rota run to serve")
        base = f"http://127.0.0.1:{m.group(1)}"
        wait_for(lambda: _answers(base), timeout=30, what="the API")
        assert loopback.get(f"{base}/jobs", headers={"Host": "rota.test"}).status_code == 200
        misdirected(loopback.get(f"{base}/jobs", headers={"Host": "evil.example"}))
    finally:
        proc.terminate()
        proc.wait(30)


def _answers(base: str) -> bool:
    try:
        loopback.get(f"{base}/healthz", timeout=1)
    except httpx.TransportError:
        return False
    return True
