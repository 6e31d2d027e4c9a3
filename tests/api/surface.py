"""Helpers for the browser-surface tests (not tests): rota's app served with what it
answered, a page served from another origin, ``rota serve`` as a process, Chromium.

A page "on another origin" is served by a second HTTP server on a different free
port; loaded as ``http://localhost:<port>/`` it is cross-site to a rota served on
127.0.0.1, loaded as ``http://127.0.0.1:<port>/`` it is same-site but cross-origin.
"""

from __future__ import annotations

import http.server
import os
import re
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright
from sqlalchemy import Engine

from rota.api import create_app
from rota.api.server import BackgroundServer, bind
from tests.support import loopback
from tests.support.api_support import rota_cmd, wait_healthy
from tests.support.executor_support import subprocess_env, wait_for

CHROMIUM = os.environ.get("ROTA_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless. A missing browser fails the test, never skips it."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install -y "
            "chromium; .ci/run does) or set ROTA_TEST_CHROMIUM. Browser tests never skip."
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Answers:
    """What the served app answered: (method, path, status), in order."""

    seen: list[tuple[str, str, int]] = field(default_factory=list)

    def of(self, method: str) -> list[tuple[str, int]]:
        return [(path, status) for m, path, status in list(self.seen) if m == method]


def recording(app: ASGIApp, answers: Answers) -> ASGIApp:
    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        async def record(message: Message) -> None:
            if message["type"] == "http.response.start":
                answers.seen.append((scope["method"], scope["path"], message["status"]))
            await send(message)

        await app(scope, receive, record)

    return recorded


@contextmanager
def serving(app: ASGIApp) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port: its base URL (``http://127.0.0.1:P``)."""
    sock = bind("127.0.0.1", 0)
    server = BackgroundServer(app, sock)
    server.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        wait_healthy(base)
        yield base
    finally:
        server.stop()


@contextmanager
def recorded_api(engine: Engine, token: str | None = None) -> Iterator[tuple[str, Answers]]:
    """The app on ``engine`` (as ``running_api`` serves it), recording what it answered."""
    answers = Answers()
    with serving(recording(create_app(engine, token=token), answers)) as base:
        yield base, answers


class _Page(http.server.BaseHTTPRequestHandler):
    html = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.html)))
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a test's output stays the test's


@contextmanager
def other_origin(html: str) -> Iterator[int]:
    """A second HTTP server on another free port answering every GET with ``html``: its port."""
    handler = type("Page", (_Page,), {"html": html.encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


ADDRESS = re.compile(r"event=serve_started address=http://[^ ]*:(\d+)")


class Output:
    """A process's stderr, collected from a thread (so its pipe never fills)."""

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


@dataclass
class Served:
    proc: subprocess.Popen[str]
    out: Output
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def rota_serve(
    db_url: str, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``rota serve --port 0 ARGS`` as a process, healthy: its port from its start line.

    ``env`` is added to the environment, which starts without ``ROTA_API_TOKEN``,
    ``ROTA_API_TOKENS_FILE`` and ``ROTA_ALLOWED_HOSTS``.
    """
    environ = subprocess_env(db_url)
    for name in ("ROTA_API_TOKEN", "ROTA_API_TOKENS_FILE", "ROTA_ALLOWED_HOSTS"):
        environ.pop(name, None)
    environ.update(env or {})
    command = rota_cmd("serve", "--port", "0", *args)
    proc = subprocess.Popen(command, env=environ, cwd=cwd, stderr=subprocess.PIPE, text=True)
    out = Output(proc)
    try:

        def started() -> int | None:
            if proc.poll() is not None:
                raise AssertionError(f"rota serve exited {proc.returncode}: {out.text()}")
            m = ADDRESS.search(out.text())
            return int(m.group(1)) if m else None

        port: int = wait_for(started, timeout=60, what="rota serve to start")
        served = Served(proc, out, port)
        wait_healthy_any_host(served)
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_healthy_any_host(served: Served) -> None:
    """Up: /healthz answers at all (a Host it refuses still proves the process serves)."""
    import httpx

    def answers() -> bool:
        if served.proc.poll() is not None:
            raise AssertionError(f"rota serve exited {served.proc.returncode}")
        try:
            loopback.get(f"{served.base}/healthz", timeout=1.0)
        except httpx.TransportError:
            return False
        return True

    wait_for(answers, timeout=30, what="rota serve to answer")


def serve_refused(
    db_url: str, cwd: Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``rota serve ARGS`` that is expected to stop at once: its exit status and output."""
    environ = subprocess_env(db_url)
    for name in ("ROTA_API_TOKEN", "ROTA_API_TOKENS_FILE", "ROTA_ALLOWED_HOSTS"):
        environ.pop(name, None)
    environ.update(env)
    return subprocess.run(
        rota_cmd("serve", "--port", "0", *args),
        env=environ,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
