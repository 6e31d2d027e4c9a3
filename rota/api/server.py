"""Running the app under uvicorn on a socket bound here, so a busy port is one clear error.

Without a token (``ROTA_API_TOKEN`` or ``ROTA_API_TOKENS_FILE``) only a loopback
address may be bound: an API that creates and cancels jobs is never left open on
a network by accident.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import uvicorn

from rota.api.browser import is_loopback

log = logging.getLogger("rota.api")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


class BindRefused(ValueError):
    """The address may not be bound (a non-loopback address without a token)."""


def check_bind(host: str, token_required: bool) -> None:
    if not token_required and not is_loopback(host):
        raise BindRefused(
            f"refusing to serve on {host} without a token: set ROTA_API_TOKEN or "
            "ROTA_API_TOKENS_FILE (every request but /healthz and /readyz must then carry "
            f"Authorization: Bearer <token>), or serve on {DEFAULT_HOST}"
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; ``OSError`` when the address is taken or not ours."""
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def make_server(app: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_config=None,  # rota's own logging setup
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    return uvicorn.Server(config)


class BackgroundServer:
    """The app served from a thread (``rota run``); ``stop()`` ends it."""

    def __init__(self, app: Any, sock: socket.socket) -> None:
        self._server = make_server(app)
        self._sock = sock
        self._thread = threading.Thread(target=self._run, name="rota-serve", daemon=True)

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        except Exception:  # the API is an extra in `rota run`: never take the process down
            log.exception("event=serve_failed")

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()
