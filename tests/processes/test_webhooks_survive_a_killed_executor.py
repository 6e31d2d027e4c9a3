"""Webhook deliveries from real `rota executor` processes: a receiver that is down
while the executor delivering is SIGKILLed still gets every event from the next one,
signed with the secret from the executor's environment, which no log shows."""

from __future__ import annotations

import dataclasses
import signal
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from rota.core.config import Backoff
from rota.producer.notify import delivery_job_type
from tests.support.executor_support import Executors, add_jobs, store_types, wait_for
from tests.support.webhook_receiver import (
    ENV,
    SECRET,
    Receiver,
    apply_with_hook,
    deliveries,
    stored_type,
)

pytestmark = pytest.mark.slow


def test_every_event_arrives_after_the_receiver_and_an_executor_were_down(
    engine: Engine,
    executors: Executors,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)  # the executors' environment (subprocess_env copies it)
    apply_with_hook(engine, receiver)
    fast = Backoff(base=timedelta(milliseconds=100), max=timedelta(milliseconds=300), jitter=0)
    short_lease = dataclasses.replace(delivery_job_type(), backoff=fast, lease=timedelta(seconds=2))
    store_types(engine, short_lease)
    receiver.down()
    failing = add_jobs(engine, stored_type(engine, "boom"), 3)
    options = ("--poll-interval", "0.1", "--sweep-interval", "0.3")
    first = executors.start(*options, ready=True)

    def refused_twice() -> bool:
        rows = deliveries(engine)
        return len(rows) == 3 and all(r["attempt_count"] >= 2 for r in rows)

    wait_for(refused_twice, timeout=30, what="every delivery refused twice")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    receiver.up()
    executors.start(*options, ready=True)
    wait_for(
        lambda: len({p.headers["rota-delivery-id"] for p in receiver.ok()}) == 3,
        timeout=30,
        what="every event delivered by the second executor",
    )
    assert {p.body["job_id"] for p in receiver.ok()} == {str(j) for j in failing}
    assert all(p.signed_with(SECRET) for p in receiver.ok())
    wait_for(
        lambda: all(d["state"] == "SUCCEEDED" for d in deliveries(engine)),
        timeout=30,
        what="every delivery SUCCEEDED",
    )
    assert SECRET not in executors.logs()
