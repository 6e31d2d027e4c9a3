"""Find or start the PostgreSQL the test suite talks to.

In order:

* ``ROTA_TEST_PG_URL``: that server;
* by default, where PostgreSQL's programs are installed (``ROTA_TEST_PG_BIN``, or
  the newest ``/usr/lib/postgresql/*/bin``): a server of the session's own, made
  with initdb in a temporary directory, on a free port, with ``fsync=off``, stopped
  and removed at the end; under pytest-xdist each worker has its own. Why: every
  test clones a database (8 MB of new files) and drops it, and each DROP DATABASE
  forces a checkpoint; on a server that syncs, those fsyncs were most of the
  suite's time (and every other user of the machine's server slowed it further).
  ``fsync`` changes nothing a test can see short of a power cut;
* ``ROTA_TEST_PG=system``, or where no programs are installed: the machine's server
  at 127.0.0.1:5432 (trust auth, database ``test``);
* ``ROTA_TEST_PG=pgserver``, or where neither works: a throwaway server from the
  pip-installed ``pgserver`` package (to check that the suite works where no
  PostgreSQL is installed).

If none can be had the PostgreSQL tests fail: a skipped PostgreSQL test is not a pass.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tests.support.pg_cluster import PG_BIN, own_cluster

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _reachable(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@contextmanager
def postgres_for_tests() -> Iterator[str]:
    """The libpq URL of an admin connection to the server the tests use, while it runs."""
    url = os.environ.get("ROTA_TEST_PG_URL")
    if url:
        url = url.replace("postgresql+psycopg://", "postgresql://")
        if not _reachable(url):
            raise RuntimeError(f"ROTA_TEST_PG_URL={url} is not reachable")
        yield url
        return
    mode = os.environ.get("ROTA_TEST_PG", "own")
    if mode not in ("own", "system", "pgserver"):
        raise RuntimeError(f"ROTA_TEST_PG={mode!r}: use own, system or pgserver")
    if mode == "own" and (PG_BIN / "initdb").exists():
        with contextlib.ExitStack() as stack:
            try:
                cluster = stack.enter_context(own_cluster())
            except Exception as exc:  # any failure: say so, and use the next server
                warnings.warn(f"no test server of our own ({exc}); trying the next", stacklevel=1)
            else:
                yield cluster.url.replace("postgresql+psycopg://", "postgresql://")
                return
    if mode != "pgserver" and _reachable(LOCAL_URL):
        yield LOCAL_URL
        return
    try:
        import pgserver
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "no PostgreSQL programs, none at 127.0.0.1:5432 and no pgserver package: "
            "pip install -e '.[test]'"
        ) from exc
    datadir = tempfile.mkdtemp(prefix="rota-pgserver-")
    server = pgserver.get_server(datadir, cleanup_mode="stop")  # type: ignore[attr-defined]  # re-exported, no __all__
    yield str(server.get_uri())
    del server
