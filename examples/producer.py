"""An application creating rota jobs from its own code: the public API, type-checked.

Run it after ``rota run`` (or ``rota migrate`` and ``rota apply schedules.yaml``)::

    python -m examples.producer [DATABASE_URL]

It creates one report job in the same transaction as the application's own
write (both commit or neither does), then a thousand jobs at once.
"""

from __future__ import annotations

import sys

from sqlalchemy import Connection, create_engine, text

import rota


def create_report(conn: Connection, order_id: int) -> rota.Enqueued:
    """One job, deduplicated by a business key: a second call returns the same job."""
    return rota.enqueue(
        conn,
        "demo.report",
        args={"rows": 3, "region": "eu", "order": order_id},
        dedup_key=f"order-{order_id}",
    )


def create_many(conn: Connection, n: int) -> list[rota.Enqueued]:
    """Many jobs in one call, for producers that create thousands at once."""
    return rota.enqueue_many(
        conn, [rota.JobRequest("demo.tick", args={"i": i}, priority=5) for i in range(n)]
    )


def main(url: str = "sqlite:///rota.db") -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("SELECT 1"))  # the application's own business write goes here
        job = create_report(conn, 42)
    print(f"report job {job.job_id} ({'created' if job.created else 'already there'})")
    with engine.begin() as conn:
        print(f"{len(create_many(conn, 1000))} tick jobs created")


if __name__ == "__main__":
    main(*sys.argv[1:2])
