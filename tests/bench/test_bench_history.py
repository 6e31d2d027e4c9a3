"""The history bench (bench/bench_history.py) measures the history it says it holds.

Both forms, grown (queued, claimed, finished in batches, vacuumed as
autovacuum would) and loaded (inserted finished in bulk), must leave the same
thing behind: every job finished, 90/7/3 SUCCEEDED/FAILED/CANCELLED, its one
attempt closed under the job's generation with the job's outcome, half of
them scheduled with unique occurrence keys, finished over the last 30 days.
A grown history whose claim or outcome step matched nothing would leave jobs
QUEUED or RUNNING and measure a queue, not a history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy.engine import make_url

from bench import bench_history

TOTAL = 5_000


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.mark.parametrize("form", sorted(bench_history.HISTORY_FORMS))
def test_a_history_holds_finished_jobs_each_with_its_closed_attempt(
    form: str, fresh_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_history, "GROW_BATCH", 700)  # several batches and vacuums
    make: Callable[[str, int, bool], float] = bench_history.HISTORY_FORMS[form]
    libpq = _libpq(fresh_pg_url)
    make(libpq, TOTAL, True)
    with psycopg.connect(libpq) as conn:
        states: Counter[str] = Counter(
            dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
        )
        assert sum(states.values()) == TOTAL
        assert set(states) == {"SUCCEEDED", "FAILED", "CANCELLED"}
        assert abs(states["SUCCEEDED"] / TOTAL - 0.90) < 0.03
        assert abs(states["FAILED"] / TOTAL - 0.07) < 0.02
        assert abs(states["CANCELLED"] / TOTAL - 0.03) < 0.015
        row = conn.execute("""
            SELECT count(*) FILTER (WHERE a.job_id IS NULL),
                   count(*) FILTER (WHERE a.ended_at IS NULL OR a.outcome <> j.state
                                    OR a.lease_generation <> j.lease_generation
                                    OR a.attempt <> j.attempt_count
                                    OR j.attempt_count <> 1),
                   count(*) FILTER (WHERE j.finished_at IS NULL OR j.started_at IS NULL
                                    OR j.lease_owner IS NOT NULL
                                    OR j.lease_expires_at IS NOT NULL),
                   count(*) FILTER (WHERE (j.state = 'FAILED') <> (j.last_error_code = 'BOOM')
                                    OR (j.state <> 'FAILED' AND j.last_error_code IS NOT NULL)),
                   count(j.dedup_key), count(DISTINCT j.dedup_key),
                   count(*) FILTER (WHERE (j.dedup_key IS NULL) <> (j.scheduled_for IS NULL)),
                   min(j.finished_at) > now() - interval '31 days',
                   max(j.finished_at) < now() + interval '1 minute',
                   count(*) FILTER (WHERE substr(j.job_id::text, 15, 1) <> '8')
            FROM jobs j LEFT JOIN job_attempts a ON a.job_id = j.job_id
        """).fetchone()
        assert row is not None
        (
            no_attempt,
            attempt_mismatch,
            unfinished,
            bad_error,
            keyed,
            distinct_keys,
            half_scheduled,
            recent,
            not_future,
            bad_ids,
        ) = row
        assert (no_attempt, attempt_mismatch, unfinished, bad_error) == (0, 0, 0, 0)
        assert keyed == distinct_keys == TOTAL // 2
        assert half_scheduled == 0
        assert recent and not_future
        assert bad_ids == 0
        attempts = conn.execute("SELECT count(*) FROM job_attempts").fetchone()
        assert attempts == (TOTAL,)
