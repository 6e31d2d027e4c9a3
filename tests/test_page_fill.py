"""New jobs go to pages with room, not into the crumbs old pages keep (PostgreSQL).

A table in use keeps, in most of its pages, a crumb of free space: what is
left of a page after its jobs finished and vacuum freed their older versions.
PostgreSQL's free space map offers every crumb big enough for a new row, so
without a fill factor a batch of new jobs was spread one row to a page over
thousands of old pages, each written whole to the WAL after a checkpoint (at
ten million finished jobs, 5% of new rows and half the enqueue's WAL). With
``jobs`` and ``job_attempts`` at a fill factor of 90 (migration 0011), an
insert takes a page only while a tenth of it stays free, so crumbs are left to
the updates of the rows already there.

Here the crumbs are made as an upgraded installation has them: pages filled
whole before migration 0011, then one finished job deleted from each.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine, text

from rota.migrations.runner import downgrade, upgrade
from rota.shared.database import libpq_dsn, make_engine
from rota.shared.enqueue import JobRequest, enqueue_many
from tests.executor_support import job_type, store_types

pytestmark = pytest.mark.usefixtures("fresh_pg_url")

_OLD = """
    INSERT INTO jobs (job_id, job_type, pool, state, attempt_count, max_attempts, run_after,
                      lease_seconds, args, created_at, updated_at, finished_at)
    SELECT gen_random_uuid(), 'old.job', 'default', 'SUCCEEDED', 1, 5, now(), 60,
           json_build_object('pad', repeat('x', 150)), now(), now(), now()
    FROM generate_series(1, :n) AS g
"""
# One finished job out of each page but the last (whose free space is not a crumb).
_CRUMBS = """
    DELETE FROM jobs WHERE ctid IN (
        SELECT min(ctid) FROM jobs
        GROUP BY (ctid::text::point)[0]
        HAVING (ctid::text::point)[0] < (SELECT max((ctid::text::point)[0]) FROM jobs)
    )
    RETURNING (ctid::text::point)[0]::int
"""
_PAGES_OF_NEW = "SELECT DISTINCT (ctid::text::point)[0]::int FROM jobs WHERE job_type = 'new.job'"


@pytest.fixture
def engine(fresh_pg_url: str) -> Iterator[Engine]:
    e = make_engine(fresh_pg_url)
    yield e
    e.dispose()


def _vacuum(engine: Engine, table: str) -> None:
    with psycopg.connect(libpq_dsn(engine), autocommit=True) as conn:
        conn.execute(f"VACUUM {table}")


def _fill_factor(engine: Engine, table: str) -> int | None:
    with engine.connect() as conn:
        options = conn.execute(
            text("SELECT reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)"), {"t": table}
        ).scalar_one()
    for option in options or []:
        name, _, value = option.partition("=")
        if name == "fillfactor":
            return int(value)
    return None


def test_the_queue_tables_keep_a_tenth_of_each_page_free(engine: Engine) -> None:
    assert _fill_factor(engine, "jobs") == 90
    assert _fill_factor(engine, "job_attempts") == 90
    downgrade(engine, "0010")
    assert _fill_factor(engine, "jobs") is None
    assert _fill_factor(engine, "job_attempts") is None
    upgrade(engine)
    assert _fill_factor(engine, "jobs") == 90


def test_new_jobs_skip_the_crumbs_of_pages_filled_before_the_upgrade(engine: Engine) -> None:
    downgrade(engine, "0010")
    with engine.begin() as conn:
        conn.execute(text(_OLD), {"n": 3000})
    with engine.begin() as conn:
        crumbed = {row[0] for row in conn.execute(text(_CRUMBS))}
    _vacuum(engine, "jobs")  # the free space map now lists a crumb in each of those pages
    assert len(crumbed) > 100
    upgrade(engine)
    store_types(engine, job_type("new.job"))
    with engine.begin() as conn:
        enqueue_many(conn, [JobRequest("new.job", args={"i": i}) for i in range(1000)])
    with engine.connect() as conn:
        pages = {row[0] for row in conn.execute(text(_PAGES_OF_NEW))}
    assert pages.isdisjoint(crumbed), f"{len(pages & crumbed)} crumbs took a new job"
