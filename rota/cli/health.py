"""``--health-port``: a liveness endpoint for ``rota scheduler``, ``executor`` and ``run``.

``GET /healthz`` answers 200 while every loop of the process comes round, and
503 when one has not passed for three of its intervals (a deadlock, a hung
statement): a Kubernetes liveness probe then restarts the wedged process. A
loop that fails against an unreachable database still comes round, so an
outage does not make every process restart. The body is a small JSON object
saying which loops are watched and which are stuck.

The server is the standard library's, in one daemon thread (plus one short
thread per request): it shares nothing with the loops but their
``Liveness`` records, so a wedged loop cannot wedge the probe.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rota.runtime.liveness import Liveness

REQUEST_TIMEOUT_SECONDS = 5.0


class HealthServer:
    def __init__(self, host: str, port: int) -> None:
        self._sources: list[Liveness] = []
        self._lock = threading.Lock()
        health = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_SECONDS  # a client that sends nothing is dropped

            def do_GET(self) -> None:
                self._answer(body=True)

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def _answer(self, *, body: bool) -> None:
                if self.path.split("?", 1)[0] != "/healthz":
                    status, doc = 404, {"error": "not found: try /healthz"}
                else:
                    status, doc = health.check()
                data = (json.dumps(doc) + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a probe every few seconds is not worth a log line

        server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="rota-health", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def watch(self, *sources: Liveness) -> None:
        with self._lock:
            self._sources.extend(sources)

    def check(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            sources: Sequence[Liveness] = list(self._sources)
        watched = sorted(name for s in sources for name in s.watched())
        stuck = [st for s in sources for st in s.stuck()]
        if not stuck:
            return 200, {"status": "ok", "loops": watched}
        return 503, {
            "status": "stuck",
            "loops": watched,
            "stuck": [
                {
                    "loop": st.loop,
                    "silent_seconds": round(st.silent_seconds, 1),
                    "allowed_seconds": round(st.allowed_seconds, 3),
                }
                for st in stuck
            ],
        }

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6  # --health-host :: or another IPv6 address
