"""A running ``rota serve`` app for the API tests: uvicorn in a thread on a free port.

The tests talk to it with a real HTTP client (httpx) over a real socket.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import httpx
from sqlalchemy import Engine, bindparam, update

from rota.api import create_app
from rota.api.failed_counts import FailedCounts
from rota.api.identities import TokenTable
from rota.api.server import BackgroundServer, bind
from rota.core.config import JobTypeSpec
from rota.core.tables import jobs
from tests.support import loopback
from tests.support.executor_support import add_jobs, job_type, store_types


@contextmanager
def running_api(
    engine: Engine,
    token: str | None = None,
    failed_counts: FailedCounts | None = None,
    tokens: TokenTable | None = None,
) -> Iterator[str]:
    """The base URL of the app on ``engine``, served until the block ends."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(engine, token=token, tokens=tokens, failed_counts=failed_counts)
    server = BackgroundServer(app, sock)
    server.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base
    finally:
        server.stop()


def wait_healthy(
    base: str, timeout: float = 30.0, proc: subprocess.Popen[str] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if loopback.get(f"{base}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{base} did not answer /healthz within {timeout}s")
        time.sleep(0.05)


def rota_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "rota.cli.main", *args]


class ManualClock:
    """A clock to pass in: it moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fail(engine: Engine, ids: Iterable[uuid.UUID]) -> None:
    """Mark the jobs FAILED as a finished attempt leaves them (for what counts them)."""
    with engine.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id.in_(bindparam("ids", expanding=True)))
            .values(state="FAILED", attempt_count=1, finished_at=jobs.c.created_at),
            {"ids": list(ids)},
        )


def failed_jobs_of_a_type(engine: Engine, n: int) -> JobTypeSpec:
    """Job type ``t``, stored, with ``n`` FAILED jobs."""
    spec = job_type("t")
    store_types(engine, spec)
    fail(engine, add_jobs(engine, spec, n))
    return spec
