"""Webhook notifications end to end, on both backends: an in-process executor POSTs
deliveries to a real HTTP receiver on a loopback port (``tests.support.webhook_receiver``)."""

from __future__ import annotations

import dataclasses
import http.server
import logging
import ssl
import subprocess
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import Engine, func, select

from rota.core.config import DEFAULT_POOL
from rota.core.notifications import DEFAULT_POOL as TARGET_DEFAULT_POOL
from rota.core.notifications import DELIVERY_JOB_TYPE, NotificationEvent
from rota.core.tables import jobs
from rota.executor.errors import RetryableError
from rota.executor.notify_delivery import deliver
from rota.producer.notify import Notice, delivery_job_type, notify
from tests.support.executor_support import (
    StartExecutor,
    add_jobs,
    attempt_rows,
    claim_as,
    job_row,
    job_type,
    store_types,
    wait_for,
)
from tests.support.webhook_receiver import (
    ENV,
    SECRET,
    Receiver,
    apply_with_hook,
    deliveries,
    stored_type,
)

INSTANT = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)


def test_a_failed_job_is_posted_signed_and_verifiable(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    apply_with_hook(engine, receiver)
    (job_id,) = add_jobs(
        engine, stored_type(engine, "boom"), schedule_name="nightly-export", scheduled_for=INSTANT
    )
    start_executor()
    (post,) = wait_for(receiver.ok, what="the POST of the failure")
    assert post.signed_with(SECRET)
    assert not post.signed_with(SECRET + "x")
    assert post.headers["content-type"] == "application/json"
    assert post.headers["rota-event"] == "job_failed"
    (delivery,) = deliveries(engine)
    assert post.headers["rota-delivery-id"] == str(delivery["job_id"])
    assert post.body == {
        "event": "job_failed",
        "schedule": "nightly-export",
        "instant": "2026-03-01T02:00:00Z",
        "job_id": str(job_id),
        "job_type": "boom",
        "state": "FAILED",
        "error_code": "BAD_INPUT",
        "reason": None,
        "job_url": f"/jobs/{job_id}",
        "target": "ops-hook",
        "delivery_id": str(delivery["job_id"]),
        "occurred_at": post.body["occurred_at"],
    }
    wait_for(lambda: job_row(engine, delivery["job_id"])["state"] == "SUCCEEDED", what="done")
    # The secret is read from the environment: no column of the delivery holds it.
    assert SECRET not in repr(job_row(engine, delivery["job_id"]))
    assert delivery["pool"] == "default" and delivery["max_attempts"] == 100


def test_a_retry_after_a_500_carries_the_same_delivery_id_and_bytes(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    apply_with_hook(engine, receiver)
    receiver.answers.append(500)
    add_jobs(engine, stored_type(engine, "boom"))
    start_executor()
    wait_for(receiver.ok, what="the POST after the 500")
    first, second = receiver.all()
    assert (first.status, second.status) == (500, 200)
    assert first.headers["rota-delivery-id"] == second.headers["rota-delivery-id"]
    assert first.raw == second.raw and second.signed_with(SECRET)
    (delivery,) = deliveries(engine)
    wait_for(lambda: job_row(engine, delivery["job_id"])["state"] == "SUCCEEDED", what="done")
    attempts = attempt_rows(engine, delivery["job_id"])
    assert [(a["outcome"], a["error_code"]) for a in attempts] == [
        ("RETRY", "500"),
        ("SUCCEEDED", None),
    ]


def test_a_receiver_slower_than_the_timeout_gets_the_delivery_again(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    apply_with_hook(engine, receiver, options="    timeout: 300ms\n")
    receiver.delays.append(1.5)
    add_jobs(engine, stored_type(engine, "boom"))
    start_executor()
    wait_for(lambda: [d for d in deliveries(engine) if d["state"] == "SUCCEEDED"], what="done")
    (delivery,) = deliveries(engine)
    attempts = attempt_rows(engine, delivery["job_id"])
    assert [(a["outcome"], a["error_code"]) for a in attempts] == [
        ("RETRY", "NOTIFY_TIMEOUT"),
        ("SUCCEEDED", None),
    ]
    wait_for(lambda: len(receiver.all()) == 2, what="the slow answer recorded too")
    assert {p.headers["rota-delivery-id"] for p in receiver.all()} == {str(delivery["job_id"])}


def test_nothing_is_lost_while_the_receiver_is_down(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    apply_with_hook(engine, receiver)
    receiver.down()
    failing = add_jobs(engine, stored_type(engine, "boom"), 3)
    with engine.begin() as conn:  # as the deadline checker will call it
        (late,) = notify(
            conn,
            Notice(
                NotificationEvent.DEADLINE_MISSED,
                key="nightly-export@2026-03-01T02:00:00Z",
                schedule="nightly-export",
                instant=INSTANT,
                job_type="boom",
                reason="not started by 02:05:00Z",
            ),
            datetime(2026, 3, 1, 2, 5, tzinfo=UTC),
        )
    start_executor()

    def all_refused_twice() -> bool:
        rows = deliveries(engine)
        return len(rows) == 4 and all(
            r["attempt_count"] >= 2 and r["last_error_code"] == "NOTIFY_UNREACHABLE" for r in rows
        )

    wait_for(all_refused_twice, what="every delivery refused at least twice")
    receiver.up()
    wait_for(lambda: len(receiver.ok()) >= 4, what="every event delivered once the receiver is up")
    bodies = {(b["event"], b["job_id"]) for b in (p.body for p in receiver.ok())}
    assert bodies == {("job_failed", str(j)) for j in failing} | {("deadline_missed", None)}
    (deadline,) = [p.body for p in receiver.ok() if p.body["event"] == "deadline_missed"]
    assert deadline["reason"] == "not started by 02:05:00Z"
    assert deadline["instant"] == "2026-03-01T02:00:00Z"
    assert deadline["delivery_id"] == str(late)
    assert all(p.signed_with(SECRET) for p in receiver.ok())


def test_a_4xx_fails_the_delivery_with_its_status_and_notifies_nothing_more(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    apply_with_hook(engine, receiver)
    receiver.answers.append(404)
    add_jobs(engine, stored_type(engine, "boom"))
    start_executor()
    wait_for(lambda: [d for d in deliveries(engine) if d["state"] == "FAILED"], what="FAILED")
    # The delivery's FAILED was written with any notice it makes: none (no loops).
    (delivery,) = deliveries(engine)
    assert (delivery["last_error_code"], delivery["attempt_count"]) == ("404", 1)
    assert len(receiver.all()) == 1


def test_a_missing_secret_fails_the_delivery_and_shows_no_secret(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    apply_with_hook(engine, receiver)
    add_jobs(engine, stored_type(engine, "boom"))
    start_executor()
    wait_for(lambda: [d for d in deliveries(engine) if d["state"] == "FAILED"], what="FAILED")
    (delivery,) = deliveries(engine)
    assert delivery["last_error_code"] == "NOTIFY_SECRET_MISSING"
    assert ENV in delivery["last_error_detail"]
    assert receiver.all() == []


def test_a_delivery_the_database_refuses_never_blocks_the_failure(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apply_with_hook(engine, receiver)
    # A delivery job type no row can be made of (the jobs table's CHECK refuses it).
    store_types(engine, dataclasses.replace(delivery_job_type(), max_attempts=0))
    (job_id,) = add_jobs(engine, stored_type(engine, "boom"))
    with caplog.at_level(logging.ERROR, logger="rota.notify"):
        start_executor()
        wait_for(lambda: job_row(engine, job_id)["state"] == "FAILED", what="FAILED")
        wait_for(
            lambda: [r for r in caplog.records if getattr(r, "event", "") == "notify_refused"],
            what="the refusal logged",
        )
    assert deliveries(engine) == []
    (attempt,) = attempt_rows(engine, job_id)
    assert (attempt["outcome"], attempt["error_code"]) == ("FAILED", "BAD_INPUT")


def test_a_handler_no_executor_can_import_is_notified_once(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    target = f"""
  handlers:
    url: {receiver.url}
    events: [handler_unavailable]
    secret_env: {ENV}
"""
    apply_with_hook(engine, receiver, notification=target)
    store_types(engine, job_type("broken", handler="tests.handlers.no_such_module:run"))
    with caplog.at_level(logging.WARNING, logger="rota.executor"):
        start_executor()
        start_executor()
        wait_for(
            lambda: (
                len([r for r in caplog.records if getattr(r, "event", "") == "handler_unavailable"])
                == 2
            ),
            what="both executors finding the handler missing",
        )
        (post,) = wait_for(receiver.ok, what="the POST")
    assert (post.body["event"], post.body["job_type"]) == ("handler_unavailable", "broken")
    assert "no_such_module" in post.body["reason"] and post.signed_with(SECRET)
    assert len(deliveries(engine)) == 1  # one notice, whichever executor found it first


def test_a_failure_found_by_the_sweeper_is_notified(
    engine: Engine,
    start_executor: StartExecutor,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    apply_with_hook(engine, receiver)
    (job_id,) = add_jobs(engine, stored_type(engine, "boom"), max_attempts=1, lease_seconds=0.3)
    (claimed,) = claim_as(engine, "a-worker-that-dies", 1)
    assert claimed.job_id == job_id
    start_executor(pools=("elsewhere", "default"))
    (post,) = wait_for(receiver.ok, what="the POST of the swept failure")
    assert (post.body["job_id"], post.body["error_code"]) == (str(job_id), "LEASE_EXPIRED")


def test_notify_sends_each_event_once_to_the_targets_that_want_it(
    engine: Engine, receiver: Receiver
) -> None:
    apply_with_hook(
        engine,
        receiver,
        f"""
  filtered:
    url: {receiver.url}
    events: [deadline_missed, job_failed]
    secret_env: {ENV}
    schedules: [nightly-export]
    job_types: [boom]
    pool: notify
""",
    )
    now = datetime(2026, 3, 1, 2, 5, tzinfo=UTC)

    def late(schedule: str, job_type: str | None = "boom") -> Notice:
        return Notice(
            NotificationEvent.DEADLINE_MISSED,
            key=f"{schedule}@2026-03-01T02:00:00Z",
            schedule=schedule,
            instant=INSTANT,
            job_type=job_type,
            reason="late",
        )

    with engine.begin() as conn:
        both = notify(conn, late("nightly-export"), now)
        assert len(both) == 2
        assert notify(conn, late("nightly-export"), now) == []  # the same event again
        assert len(notify(conn, late("other"), now)) == 1  # filtered out of "filtered"
        assert len(notify(conn, late("nightly-export", job_type="quiet"), now)) == 0
        set_aside = Notice(NotificationEvent.SCHEDULE_SET_ASIDE, key="x", schedule="other")
        assert notify(conn, set_aside, now) == []  # nobody asked for it
    pools = {d["job_id"]: d["pool"] for d in deliveries(engine)}
    assert sorted(pools[i] for i in both) == ["default", "notify"]
    with engine.connect() as conn:
        trans = conn.begin()
        assert len(notify(conn, _next_night(late("nightly-export")), now)) == 2
        trans.rollback()  # an event rolled back is notified nowhere
    assert len(deliveries(engine)) == 3


def _next_night(notice: Notice) -> Notice:
    return dataclasses.replace(notice, key="nightly-export@2026-03-02T02:00:00Z")


def test_hostile_event_keys_and_reasons_are_stored(engine: Engine, receiver: Receiver) -> None:
    apply_with_hook(engine, receiver)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    keys = ["nul\x00key", "k" * 5_000, "lone \ud800 surrogate"]
    with engine.begin() as conn:
        for key in keys:
            notice = Notice(
                NotificationEvent.DEADLINE_MISSED, key=key, reason="why\x00" + "r" * 10_000
            )
            assert len(notify(conn, notice, now)) == 1
            assert notify(conn, notice, now) == []  # the same key, however hostile
    reasons = [d["args"]["body"]["reason"] for d in deliveries(engine)]
    assert all("\x00" not in r and len(r) <= 2_000 for r in reasons)


def test_a_delivery_jobs_own_failure_is_never_notified(engine: Engine, receiver: Receiver) -> None:
    apply_with_hook(engine, receiver)
    loop = Notice(
        NotificationEvent.JOB_FAILED, key="loop", job_id=uuid.uuid4(), job_type=DELIVERY_JOB_TYPE
    )
    with engine.begin() as conn:
        assert notify(conn, loop, datetime(2026, 3, 1, tzinfo=UTC)) == []
        count = conn.execute(select(func.count()).select_from(jobs)).scalar_one()
    assert count == 0


def test_a_targets_default_pool_is_the_default_pool() -> None:
    assert TARGET_DEFAULT_POOL == DEFAULT_POOL


def test_the_retries_of_a_delivery_outlast_a_receiver_down_for_an_hour() -> None:
    spec = delivery_job_type()
    waits = sum(
        (spec.backoff.delay_before_jitter(n) for n in range(1, spec.max_attempts)), timedelta()
    )
    assert timedelta(hours=7, minutes=45) < waits < timedelta(hours=8)


def test_a_receiver_whose_certificate_is_not_trusted_gets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deliveries share one TLS context a process; it verifies on every use."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    posts: list[str] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posts.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(ENV, SECRET)
    url = f"https://127.0.0.1:{server.server_address[1]}/hook"
    ctx = SimpleNamespace(
        job_id=uuid.uuid4(),
        args={"url": url, "secret_env": ENV, "body": {"event": "job_failed"}, "target": "t"},
    )
    try:
        for _ in range(2):  # the context made by the first, then the same one again
            with pytest.raises(RetryableError) as refused:
                deliver(ctx)
            assert refused.value.code == "NOTIFY_UNREACHABLE"
    finally:
        server.shutdown()
        server.server_close()
    assert posts == []
