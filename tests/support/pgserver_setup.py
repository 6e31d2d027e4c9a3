"""Find or start the PostgreSQL the test suite talks to.

In order: ``ROTA_TEST_PG_URL``; the machine's server at 127.0.0.1:5432 (trust
auth, database ``test``); a throwaway server from the pip-installed ``pgserver``
package (``ROTA_TEST_PG=pgserver`` forces this last one, to check that the suite
works where no PostgreSQL is installed). If none can be had the PostgreSQL
tests fail: a skipped PostgreSQL test is not a pass.
"""

from __future__ import annotations

import os
import tempfile

import psycopg

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _reachable(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def find_postgres() -> tuple[str, object | None]:
    """Return (libpq URL of an admin connection, handle keeping a throwaway server alive)."""
    url = os.environ.get("ROTA_TEST_PG_URL")
    if url:
        url = url.replace("postgresql+psycopg://", "postgresql://")
        if not _reachable(url):
            raise RuntimeError(f"ROTA_TEST_PG_URL={url} is not reachable")
        return url, None
    forced = os.environ.get("ROTA_TEST_PG") == "pgserver"
    if not forced and _reachable(LOCAL_URL):
        return LOCAL_URL, None
    try:
        import pgserver
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "no PostgreSQL at 127.0.0.1:5432 and the pgserver package is not installed: "
            "pip install -e '.[test]'"
        ) from exc
    datadir = tempfile.mkdtemp(prefix="rota-pgserver-")
    server = pgserver.get_server(datadir, cleanup_mode="stop")  # type: ignore[attr-defined]  # re-exported, no __all__
    uri = str(server.get_uri())
    return uri, server
