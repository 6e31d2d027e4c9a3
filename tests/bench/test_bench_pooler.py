"""The pooler bench (bench/bench_pooler.py) runs all three cases and checks its jobs.

A small form (a few hundred jobs, 4 pooled executors, one scheduler, a short idle
window) against this worker's own server: every case drains every job exactly once
(its untimed warm-up drain's too) through its connections, the pooled case never
holds more server connections than PgBouncer's pool, and the figures it prints are
there.
"""

from __future__ import annotations

import re

import pytest

from bench import bench_pooler
from bench.pgbouncer import PgBouncerAbsent, pgbouncer_binary

pytestmark = pytest.mark.slow


def test_the_pooler_bench_drains_every_case_within_the_pool(
    pg_admin_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        pgbouncer_binary()
    except PgBouncerAbsent as absent:
        pytest.skip(f"{absent}; CI installs it")
    code = bench_pooler.main(
        [
            "--jobs", "300", "--executors", "4", "--schedulers", "1",
            "--idle-seconds", "1", "--rounds", "1", "--pg-url", pg_admin_url,
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert len(re.findall(r"; verified$", out, re.M)) == 3, out
    # Each case drained as many jobs untimed first, and verify counted both drains.
    assert len(re.findall(r"after an untimed warm-up drain of 300 jobs", out)) == 3, out
    most = re.search(r"server connections: pooled-4 at most (\d+) \(pool (\d+)\)", out)
    assert most is not None, out
    assert 1 <= int(most[1]) <= int(most[2]) == bench_pooler.POOL_SIZE
    assert re.search(r"with 4 idle executors and 1 schedulers: PostgreSQL \d", out), out
