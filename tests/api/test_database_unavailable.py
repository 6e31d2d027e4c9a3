"""An API request while the database cannot be reached: 503, and no address in the answer.

The server's log keeps the driver's message (with host and port) for the
operator; the answer says only that the database is unavailable, as /readyz
does. PostgreSQL on a loopback port nothing listens on stands in for a
server that went away.
"""

from __future__ import annotations

import socket

from rota.core.database import make_engine
from tests.support import loopback
from tests.support.api_support import running_api


def test_a_request_without_a_database_is_a_503_that_names_no_address() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    engine = make_engine(f"postgresql+psycopg://rota@127.0.0.1:{port}/rota?connect_timeout=2")
    try:
        with running_api(engine) as base:
            r = loopback.get(f"{base}/jobs", timeout=30)
    finally:
        engine.dispose()
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.headers["retry-after"] == "5"
    assert r.json()["title"] == "Database unavailable"
    assert str(port) not in r.text and "127.0.0.1" not in r.text, r.text
