"""A real HTTP receiver of webhooks on a loopback port, for the notification tests.

It records every POST (headers and raw body) and answers with the statuses
queued in ``answers`` (200 once they run out), after the delays queued in
``delays`` (none once they run out). ``down()`` closes the
listening socket (connections are refused); ``up()`` listens again on the
same port.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
