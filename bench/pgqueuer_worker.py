"""pgqueuer's side of ``bench.bench_compare``: its own worker, at its defaults, with a no-op job.

``python -m bench.pgqueuer_worker`` runs ``pgqueuer.run(factory)``, the
function pgqueuer's ``pgq run`` command runs (the command itself fails with
this typer version at its logging setup), on the event loop ``pgq run``
uses (uvloop), at its default settings: batch size 10, its default status
and heartbeat buffers. The factory only gives it a connection (asyncpg, the
driver ``pgq run`` picks first when it is installed) to the database named by
``ROTA_BENCH_PGQ_DSN`` and one entrypoint, ``noop``, that does nothing, as
rota's ``bench.handlers:noop`` does. ``install_and_enqueue`` prepares a
database through pgqueuer's own API.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pgqueuer
from pgqueuer.adapters.cli.cli import asyncio_run
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries

ENTRYPOINT = "noop"
ENQUEUE_CHUNK = 1000


@asynccontextmanager
async def main() -> AsyncIterator[QueueManager]:
    connection = await asyncpg.connect(os.environ["ROTA_BENCH_PGQ_DSN"])
    try:
        qm = QueueManager(Queries(AsyncpgDriver(connection)))

        @qm.entrypoint(ENTRYPOINT)  # type: ignore[untyped-decorator,unused-ignore]  # untyped without the bench extra
        async def noop(job: Job) -> None:
            return None

        yield qm
    finally:
        await connection.close()


async def _install_and_enqueue(dsn: str, count: int) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(connection))
        await queries.install()
        for start in range(0, count, ENQUEUE_CHUNK):
            n = min(ENQUEUE_CHUNK, count - start)
            await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


def install_and_enqueue(dsn: str, count: int) -> None:
    """pgqueuer's tables in ``dsn``, holding ``count`` queued no-op jobs."""
    asyncio.run(_install_and_enqueue(dsn, count))


if __name__ == "__main__":
    asyncio_run(pgqueuer.run(main))
