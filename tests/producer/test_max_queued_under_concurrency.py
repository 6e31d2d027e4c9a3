"""``max_queued`` holds when many producers submit at the same instant.

Each trial starts with the queue one short of several free places and sends
more submissions than fit, all released together by a barrier: through a
running server (16 concurrent ``POST /jobs``) and through threads calling
``rota.enqueue`` on their own connections. However the submissions interleave,
the waiting jobs never exceed the limit, and exactly the free places are taken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy import Engine, func, select

import rota
from rota.core.tables import jobs
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import add_jobs, job_type, store_types

LIMIT = 5
ALREADY_WAITING = 4
SUBMITTERS = 16
TRIALS = 4


def waiting(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count())
                .select_from(jobs)
                .where(jobs.c.job_type == name, jobs.c.state == "QUEUED")
            ).scalar_one()
        )


def all_at_once(n: int, submit: Callable[[int], str]) -> list[str]:
    """``submit(i)`` in ``n`` threads released together; each one's outcome, in order."""
    barrier = threading.Barrier(n)
    outcomes: list[str] = [""] * n

    def run(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            outcomes[i] = submit(i)
        except Exception as exc:  # an unexpected failure is an outcome the test shows
            outcomes[i] = f"error {type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_concurrent_posts_never_pass_max_queued(engine: Engine) -> None:
    with running_api(engine) as base:
        clients = [loopback.Client(base_url=base, timeout=30) for _ in range(SUBMITTERS)]
        try:
            for trial in range(TRIALS):
                name = f"limited.http.{trial}"
                spec = job_type(name, max_queued=LIMIT)
                store_types(engine, spec)
                add_jobs(engine, spec, ALREADY_WAITING)

                def post(i: int, name: str = name) -> str:
                    r = clients[i].post("/jobs", json={"job_type": name})
                    return str(r.status_code)

                outcomes = all_at_once(SUBMITTERS, post)
                assert sorted(set(outcomes)) == ["202", "429"], outcomes
                assert outcomes.count("202") == LIMIT - ALREADY_WAITING, (trial, outcomes)
                assert waiting(engine, name) == LIMIT, trial
        finally:
            for c in clients:
                c.close()


def test_concurrent_enqueue_calls_never_pass_max_queued(engine: Engine) -> None:
    for trial in range(TRIALS):
        name = f"limited.python.{trial}"
        spec = job_type(name, max_queued=LIMIT)
        store_types(engine, spec)
        add_jobs(engine, spec, ALREADY_WAITING)

        def submit(i: int, name: str = name) -> str:
            try:
                with engine.begin() as conn:
                    rota.enqueue(conn, name)
            except rota.QueueFull:
                return "refused"
            return "created"

        outcomes = all_at_once(SUBMITTERS, submit)
        assert sorted(set(outcomes)) == ["created", "refused"], outcomes
        assert outcomes.count("created") == LIMIT - ALREADY_WAITING, (trial, outcomes)
        assert waiting(engine, name) == LIMIT, trial
