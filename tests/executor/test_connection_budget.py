"""The server connections an executor keeps (docs/deployment.md, "Connection budget").

Its three loops (claim loop, outcome writer, heartbeat) each hold one connection
of the engine's pool for good, and the LISTEN connection is its own; everything
else that reads or writes now and then (the metrics flush, the job types'
refresh, the listener's probe, index upkeep) takes one from the pool for a
moment. The pool keeps what it opened up to its size, so with the default size
an executor whose occasional users once overlapped kept two idle connections
for ever. ``ENGINE_POOL`` keeps one spare beside the loops' three.
"""

from __future__ import annotations

from sqlalchemy import text

from rota.core.database import make_engine
from rota.executor.service import ENGINE_POOL, LOOP_CONNECTIONS
from tests.support.executor_support import (
    add_jobs,
    job_type,
    running_executors,
    states,
    store_types,
    wait_for,
)


def test_an_executor_keeps_its_loops_connections_its_listen_and_one_spare(
    fresh_pg_url: str,
) -> None:
    engine = make_engine(
        fresh_pg_url, pool_size=ENGINE_POOL.size, max_overflow=ENGINE_POOL.overflow
    )
    monitor = make_engine(fresh_pg_url, pool_size=1)
    spec = job_type("budget")
    # Held over a second: the heartbeat asks whether it was cancelled, on its connection.
    held_a_while = job_type("held", handler="tests.handlers.plain:finish_after")
    store_types(monitor, spec, held_a_while)
    try:
        with running_executors(engine) as start:
            start()
            ids = add_jobs(monitor, spec, 50)
            ids += add_jobs(monitor, held_a_while, args={"seconds": 3.0})
            wait_for(
                lambda: set(states(monitor, ids).values()) == {"SUCCEEDED"},
                what="every job succeeded",
            )
            # Two occasional users at once, as a metrics flush and a job type refresh
            # sometimes are: each gets a connection, and the pool keeps one of them.
            with engine.connect() as first, engine.connect() as second:
                first.execute(text("SELECT 1"))
                second.execute(text("SELECT 1"))
            with monitor.connect() as conn:
                held = conn.execute(
                    text(
                        "SELECT left(query, 60) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        " AND backend_type = 'client backend'"
                    )
                ).all()
            # The loops', LISTEN and one spare.
            assert len(held) == LOOP_CONNECTIONS + 1 + 1, held
    finally:
        engine.dispose()
        monitor.dispose()
