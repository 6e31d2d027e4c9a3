"""A real HTTP receiver of webhooks on a loopback port, for the notification tests.

It records every POST (headers and raw body) and answers with the statuses
queued in ``answers`` (200 once they run out), after the delays queued in
``delays`` (none once they run out). ``down()`` closes the
listening socket (connections are refused); ``up()`` listens again on the
same port. The helpers below apply a schedule file whose target posts to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import Engine, select

from rota.core.config import Backoff, JobTypeSpec
from rota.core.notifications import DELIVERY_JOB_TYPE
from rota.core.queries.job_types import get_job_type
from rota.core.tables import jobs
from rota.producer.notify import delivery_job_type
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support.executor_support import store_types


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes
    status: int  # what the receiver answered

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed

    def signed_with(self, secret: str) -> bool:
        """The receiver's check, as docs/notifications.md describes it."""
        expected = "sha256=" + hmac.new(secret.encode(), self.raw, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.headers.get("rota-signature", ""))


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: deque[int] = deque()
        self.delays: deque[float] = deque()  # seconds to wait before answering, per POST
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with receiver._lock:
                    delay = receiver.delays.popleft() if receiver.delays else 0.0
                time.sleep(delay)  # a slow receiver, as the sender sees it
                with receiver._lock:
                    status = receiver.answers.popleft() if receiver.answers else 200
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.received.append(Received(self.path, headers, raw, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def ok(self) -> list[Received]:
        """The POSTs answered with a 2xx."""
        with self._lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def all(self) -> list[Received]:
        with self._lock:
            return list(self.received)


SECRET = "s3cr3t-only-in-the-environment"
ENV = "ROTA_TEST_HOOK_SECRET"


def apply_with_hook(
    engine: Engine, receiver: Receiver, notification: str = "", options: str = ""
) -> None:
    """Apply a file whose target ``ops-hook`` (``options`` added to it) posts to
    ``receiver``, and make deliveries retry within a tenth of a second."""
    text = f"""
job_types:
  boom:
    handler: tests.handlers.plain:permanent
  quiet:
    handler: tests.handlers.plain:permanent
schedules:
  nightly-export:
    job_type: boom
    cron: "0 2 * * *"
  other:
    job_type: boom
    cron: "0 3 * * *"
notifications:
  ops-hook:
    url: {receiver.url}
    events: [job_failed, deadline_missed]
    secret_env: {ENV}
{options}{notification}
"""
    apply_schedule_file(engine, load_schedule_text(text, "notify.yaml"))
    # Production retries from 5 s to 5 min (about 8 h in all); here a tenth of a second.
    fast = Backoff(base=timedelta(milliseconds=100), max=timedelta(milliseconds=200), jitter=0)
    store_types(engine, dataclasses.replace(delivery_job_type(), backoff=fast))


def stored_type(engine: Engine, name: str) -> JobTypeSpec:
    """A job type as `rota apply` stored it."""
    with engine.connect() as conn:
        spec = get_job_type(conn, name)
    assert spec is not None
    return spec


def deliveries(engine: Engine) -> list[dict[str, Any]]:
    """Every delivery job's row."""
    with engine.connect() as conn:
        rows = conn.execute(select(jobs).where(jobs.c.job_type == DELIVERY_JOB_TYPE)).mappings()
        return [dict(r) for r in rows]
