"""Concurrency keys and tenant caps hold under concurrent claimers, on both backends.

Several threads, each with its own connection, claim and complete jobs as fast
as they can while a checker reads the table in single statements: at no moment
may two leased jobs share a ``concurrency_key``, or a tenant hold more than
``tenant_limit`` leases.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from sqlalchemy import Engine, text, update
from sqlalchemy.exc import IntegrityError

from rota.core.claimed import ClaimedJob
from rota.core.queries.jobs_outcome import Finish, Finished, finish_if_lease_held
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import jobs
from tests.support.executor_support import add_jobs, claim_as, job_type, states, store_types

TENANT_LIMIT = 2

_KEY_VIOLATIONS = text("""
    SELECT concurrency_key, count(*) FROM jobs
    WHERE state IN ('RUNNING', 'CANCEL_REQUESTED') AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key HAVING count(*) > 1
""")
_TENANT_VIOLATIONS = text(f"""
    SELECT tenant, count(*) FROM jobs
    WHERE state IN ('RUNNING', 'CANCEL_REQUESTED') AND tenant IS NOT NULL
    GROUP BY tenant HAVING count(*) > {TENANT_LIMIT}
""")


def test_keys_and_tenant_caps_hold_under_concurrent_claimers(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    ids: list[object] = []
    for k in range(4):
        ids += add_jobs(engine, spec, 8, concurrency_key=f"key-{k}")
    for tenant in ("acme", "globex"):
        ids += add_jobs(engine, spec, 12, tenant=tenant)
    ids += add_jobs(engine, spec, 4, tenant="acme", concurrency_key="key-0")
    ids += add_jobs(engine, spec, 20)
    stop = threading.Event()
    errors: list[str] = []
    seen_key_claims: list[str] = []

    def claimer(n: int) -> None:
        rng = random.Random(n)
        owner = f"claimer:{n}:x"
        held: list[ClaimedJob] = []
        try:
            while not stop.is_set():
                got = claim_as(engine, owner, rng.randint(1, 4), tenant_limit=TENANT_LIMIT)
                held += got
                seen_key_claims.extend(c.concurrency_key for c in got if c.concurrency_key)
                if held and (rng.random() < 0.7 or not got):
                    cut = rng.randint(1, len(held))
                    done, held = held[:cut], held[cut:]
                    fs = [
                        Finish(
                            c.job_id,
                            c.lease_generation,
                            JobState.SUCCEEDED,
                            AttemptOutcome.SUCCEEDED,
                        )
                        for c in done
                    ]
                    with engine.begin() as conn:
                        written = finish_if_lease_held(conn, owner=owner, finishes=fs)
                    if not all(isinstance(w, Finished) for w in written):
                        errors.append(f"{owner} lost a lease it held")
                if not got and not held:
                    stop.wait(0.005)
        except Exception as exc:  # surfaced by the assertion below
            errors.append(repr(exc))

    def checker() -> None:
        try:
            while not stop.is_set():
                with engine.connect() as conn:
                    keys = conn.execute(_KEY_VIOLATIONS).all()
                    tenants = conn.execute(_TENANT_VIOLATIONS).all()
                    conn.rollback()
                if keys or tenants:
                    errors.append(f"violation: keys={keys} tenants={tenants}")
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(6)]
    threads.append(threading.Thread(target=checker))
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 60.0
        while time.monotonic() < end and not errors:
            if all(s == "SUCCEEDED" for s in states(engine).values()):
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert errors == []
    assert set(states(engine).values()) == {"SUCCEEDED"}
    assert len(seen_key_claims) == 36  # every keyed job was claimed exactly once


def test_tenant_cap_and_key_within_one_batch(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    add_jobs(engine, spec, 5, tenant="acme")
    add_jobs(engine, spec, 3, concurrency_key="k")
    add_jobs(engine, spec, 2)
    got = claim_as(engine, "o:1:x", 50, tenant_limit=2)
    assert sum(1 for c in got if c.tenant == "acme") == 2
    assert sum(1 for c in got if c.concurrency_key == "k") == 1
    assert len(got) == 5
    again = claim_as(engine, "o:1:x", 50, tenant_limit=2)
    assert again == []
    # Without a tenant limit, tenants are not capped; keys always are.
    more = claim_as(engine, "o:1:x", 50)
    assert len(more) == 3 and all(c.tenant == "acme" for c in more)


def test_database_refuses_a_second_leased_job_per_key(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    add_jobs(engine, spec, 2, concurrency_key="k")
    (c,) = claim_as(engine, "o:1:x", 5)
    assert c.concurrency_key == "k"
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.state == "QUEUED")
            .values(state="RUNNING", lease_owner="rogue", lease_expires_at=jobs.c.run_after)
        )
