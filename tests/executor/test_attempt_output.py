"""Each attempt keeps the tail of what its handler wrote, on both backends.

A ``command:``'s stdout and stderr, a Python handler's ``ctx.log`` lines and
log records, attributed to the right attempt when handlers run at once in
threads and in tasks; bounded to the last 64 KiB; one output per attempt;
written under the lease fence; pruned with the job.
"""

from __future__ import annotations

import logging
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from rota.core.config import Isolation, JobTypeSpec
from rota.core.queries.attempt_output import AttemptOutput, attempt_output
from rota.core.queries.jobs_outcome import Finish, Finished, LeaseLost, finish_if_lease_held
from rota.core.queries.jobs_prune import PruneRule, prune_finished_batch
from rota.core.states import AttemptOutcome, JobState
from rota.core.storable import ATTEMPT_OUTPUT_MAX_BYTES
from rota.core.tables import job_attempt_output
from rota.executor.lease import HeldJob
from rota.executor.output import OutputTail
from tests.handlers import output as handlers
from tests.support.executor_support import (
    FAST_RETRY,
    StartExecutor,
    add_jobs,
    claim_as,
    claimed_job,
    job_type,
    state_is,
    store_types,
    wait_for,
)

H = "tests.handlers.output"


def output_of(engine: Engine, job_id: uuid.UUID, n: int | None = None) -> AttemptOutput:
    with engine.connect() as conn:
        kept = attempt_output(conn, job_id, n)
    assert kept is not None, f"job {job_id} has no attempt {n}"
    return kept


def kept_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(job_attempt_output)).scalar_one())


def test_a_command_keeps_its_stdout_and_stderr(
    engine: Engine, start_executor: StartExecutor
) -> None:
    script = "echo to stdout; echo to stderr >&2; printf 'raw \\377 and \\000 end\\n'"
    spec = JobTypeSpec(name="cmd", command=("sh", "-c", script))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    kept = output_of(engine, job_id, 1)
    assert "to stdout\n" in kept.output and "to stderr\n" in kept.output
    # Not UTF-8 and NUL: replaced, never refused (PostgreSQL text holds no NUL).
    assert "raw \ufffd and \\x00 end\n" in kept.output
    assert kept.dropped_bytes == 0 and kept.outcome == "SUCCEEDED"


def test_the_output_is_what_the_handler_wrote_and_nothing_of_rotas(
    engine: Engine, start_executor: StartExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    # Everything logged: rota's own records made in the job's context (the
    # command_output line of each line read) exist, and are not the handler's words;
    # neither is the job's args, which the command was given and did not print.
    caplog.set_level(logging.DEBUG)
    spec = JobTypeSpec(name="cmd", command=("sh", "-c", "echo done"))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"api_token": "s3cr3t-t0ken"})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    assert any(getattr(r, "event", None) == "command_output" for r in caplog.records)
    assert output_of(engine, job_id).output == "done\n"


def test_a_handler_keeps_its_ctx_log_lines_and_log_records(
    engine: Engine, start_executor: StartExecutor
) -> None:
    # The process logs at WARNING (logging's default): ctx.log's INFO lines are kept
    # anyway; the handler's own logger's INFO records are not made, its WARNINGs are.
    assert not logging.getLogger(H).isEnabledFor(logging.INFO)
    spec = job_type("says", handler=f"{H}:says")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"word": "hello"})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    text = output_of(engine, job_id).output
    assert re.search(r"^\S+Z INFO rota\.handler: ctx says hello$", text, re.M), text
    assert re.search(r"^\S+Z INFO rota\.handler: ctx called with hello$", text, re.M), text
    assert re.search(rf"^\S+Z WARNING {H}: own logger warning hello$", text, re.M), text
    assert "own logger info" not in text
    assert "ERROR rota.handler: caught it\nTraceback" in text
    assert "ValueError: a handled problem" in text
    # rota's own records (claims, events) are not the handler's words.
    assert all(" rota.handler: " in line or f" {H}: " in line for line in _record_lines(text))


def test_a_handler_keeps_its_info_records_when_the_process_logs_them(
    engine: Engine, start_executor: StartExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=H)
    spec = job_type("says", handler=f"{H}:says")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"word": "again"})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    text = output_of(engine, job_id).output
    assert f"INFO {H}: own logger info again" in text
    # The executor's own log still gets the record, once.
    assert [r.getMessage() for r in caplog.records if r.name == H].count(
        "own logger info again"
    ) == 1


def test_an_isolated_handler_keeps_its_records_and_ctx_log_lines(
    engine: Engine, start_executor: StartExecutor
) -> None:
    # The process logs at WARNING: the child sends its WARNINGs and ctx.log's INFOs.
    spec = job_type("says", handler=f"{H}:says", isolation=Isolation.PROCESS)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"word": "apart"})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), timeout=30, what="SUCCEEDED")
    text = output_of(engine, job_id).output
    assert "INFO rota.handler: ctx says apart\n" in text
    assert f"WARNING {H}: own logger warning apart\n" in text
    assert "own logger info" not in text
    assert "ERROR rota.handler: caught it\nTraceback" in text and "a handled problem" in text


def test_handlers_running_at_once_keep_only_their_own_records(
    engine: Engine, start_executor: StartExecutor
) -> None:
    threads = job_type("threads", handler=f"{H}:tagged")
    tasks = job_type("tasks", handler=f"{H}:tagged_async")
    store_types(engine, threads, tasks)
    ids = {}
    for spec, tags in ((threads, ("T1", "T2")), (tasks, ("A1", "A2"))):
        for tag in tags:
            (ids[tag],) = add_jobs(engine, spec, args={"tag": tag})
    start_executor(concurrency=4)
    for job_id in ids.values():
        wait_for(state_is(engine, job_id, "SUCCEEDED"), timeout=30, what="SUCCEEDED")
    spans = []
    for tag, job_id in ids.items():
        lines = _record_lines(output_of(engine, job_id).output)
        assert len(lines) == 2 * handlers.ROUNDS, (tag, lines)
        assert all(f"tag {tag} " in line for line in lines), (tag, lines)
        spans.append((_when(lines[0]), _when(lines[-1])))
    # They did run at once: every handler started before any had ended.
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans


def test_only_the_last_64_kib_are_kept(engine: Engine, start_executor: StartExecutor) -> None:
    command = JobTypeSpec(name="cmd", command=("sh", "-c", "seq 1 40000"))
    python = job_type("loud", handler=f"{H}:loud")
    store_types(engine, command, python)
    (cmd_id,) = add_jobs(engine, command)
    (loud_id,) = add_jobs(engine, python, args={"lines": 3000})
    start_executor()
    for job_id in (cmd_id, loud_id):
        wait_for(state_is(engine, job_id, "SUCCEEDED"), timeout=30, what="SUCCEEDED")

    everything = "".join(f"{i}\n" for i in range(1, 40001))
    kept = output_of(engine, cmd_id)
    assert len(kept.output.encode()) == ATTEMPT_OUTPUT_MAX_BYTES
    assert everything.endswith(kept.output)
    assert kept.dropped_bytes == len(everything) - ATTEMPT_OUTPUT_MAX_BYTES

    kept = output_of(engine, loud_id)
    assert len(kept.output.encode()) == ATTEMPT_OUTPUT_MAX_BYTES
    assert kept.output.endswith(f"line 002999 {'x' * 60}\n")
    assert "line 000000 " not in kept.output and kept.dropped_bytes > 100_000


def test_each_attempt_keeps_its_own_output(engine: Engine, start_executor: StartExecutor) -> None:
    spec = job_type("flaky", handler=f"{H}:fails_first", backoff=FAST_RETRY)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    first, second = output_of(engine, job_id, 1), output_of(engine, job_id, 2)
    assert first.outcome == "RETRY" and second.outcome == "SUCCEEDED"
    assert "attempt 1 speaking" in first.output and "attempt 2" not in first.output
    assert "attempt 2 speaking" in second.output and "attempt 1" not in second.output
    assert output_of(engine, job_id).number == 2  # the latest, without a number
    with engine.connect() as conn:
        assert attempt_output(conn, job_id, 3) is None
        assert attempt_output(conn, job_id, 0) is None


def test_output_is_written_under_the_lease_fence(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    (claimed,) = claim_as(engine, "w1", 1)
    done = Finish(
        job_id,
        claimed.lease_generation,
        JobState.SUCCEEDED,
        AttemptOutcome.SUCCEEDED,
        needs_reconcile=False,
        output="said by w1\n",
    )
    with engine.begin() as conn:  # another owner: the fence lets nothing through
        assert finish_if_lease_held(conn, owner="w2", finishes=[done]) == [
            LeaseLost(job_id, claimed.lease_generation)
        ]
    assert kept_rows(engine) == 0
    stale = done._replace(generation=claimed.lease_generation - 1, output="stale\n")
    with engine.begin() as conn:  # an older generation of the same owner: neither
        written = finish_if_lease_held(conn, owner="w1", finishes=[stale, done])
    assert written[0] == LeaseLost(job_id, claimed.lease_generation - 1)
    assert written[1] == Finished(job_id, JobState.SUCCEEDED)
    assert output_of(engine, job_id, 1).output == "said by w1\n"
    assert kept_rows(engine) == 1


def test_pruning_a_job_removes_its_attempts_output(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = JobTypeSpec(name="cmd", command=("sh", "-c", "echo kept until pruned"))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    assert output_of(engine, job_id).output == "kept until pruned\n"
    later = datetime.now(UTC) + timedelta(days=1)
    with engine.begin() as conn:
        pruned = prune_finished_batch(conn, PruneRule("SUCCEEDED", "cmd", timedelta(0)), now=later)
    assert pruned.jobs == 1
    assert kept_rows(engine) == 0


def test_the_tail_is_bounded_while_it_fills_and_cut_at_a_character() -> None:
    tail = OutputTail(limit=10)
    for _ in range(1000):
        tail.write("é" * 7)  # 14 bytes a write: far more than the limit
        assert sum(len(c) for c in tail._chunks) < 2 * 10 + 14
    kept = tail.snapshot()
    assert kept is not None
    assert kept.text == "é" * 5  # 10 bytes, whole characters only
    assert kept.dropped_bytes == 14 * 1000 - 10
    assert OutputTail().snapshot() is None  # nothing written: no output at all


def _record_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"\d{4}-\d\d-\d\dT\S+Z ", line)]


def _when(line: str) -> datetime:
    return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00"))


@pytest.mark.parametrize("kind", ["command", "handler", "isolated handler"])
def test_a_running_attempts_output_is_kept_with_its_lease_renewals(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, kind: str
) -> None:
    """An operator reads what a running attempt wrote so far, at most a renewal
    interval late (a third of the lease); the outcome's output replaces it."""
    gate = tmp_path / "go"
    if kind == "command":
        script = f"echo started; while [ ! -e '{gate}' ]; do sleep 0.05; done; echo ending"
        spec = JobTypeSpec(name="cmd", command=("sh", "-c", script), lease=timedelta(seconds=3))
        args = None
    else:
        isolation = Isolation.PROCESS if kind == "isolated handler" else Isolation.THREAD
        spec = job_type(
            "gated", handler=f"{H}:gated", lease=timedelta(seconds=3), isolation=isolation
        )
        args = {"gate": str(gate)}
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args=args)
    start_executor()

    def said_so_far() -> bool:
        with engine.connect() as conn:
            kept = attempt_output(conn, job_id)
        return kept is not None and "started\n" in kept.output

    wait_for(said_so_far, timeout=10, what="the output so far")
    running = output_of(engine, job_id)
    assert running.outcome is None and "ending" not in running.output
    gate.touch()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    kept = output_of(engine, job_id)
    assert kept.outcome == "SUCCEEDED"
    assert kept.output.endswith("ending\n") and kept.output.count("started\n") == 1
    assert kept_rows(engine) == 1


def test_a_renewal_takes_the_tail_when_there_is_more_at_most_once_a_renewal_interval() -> None:
    """Progress makes renewals come every half second: the tail (up to 64 KiB a job)
    goes at most once a third of the lease, and again after a renewal that failed."""
    claimed = claimed_job(lease_generation=3, lease_seconds=30.0)
    tail = OutputTail()
    held = HeldJob(claimed, None, renewed_at=0.0, output=tail)
    assert held.renewal(0.0).output is None  # nothing written yet
    tail.write("one\n")
    held.set_progress("load", 1, 10)
    first = held.renewal(0.5)
    assert (first.output, first.output_dropped, first.generation) == ("one\n", 0, 3)
    assert held.renewal(0.6).output is None  # nothing more since
    tail.write("two\n")
    held.set_progress("load", 2, 10)
    soon = held.renewal(1.0)  # progress is due, the tail is not: 10 s after the last
    assert soon.done == 2 and soon.output is None
    assert held.renewal(10.49).output is None
    assert held.renewal(10.5).output == "one\ntwo\n"
    tail.write("three\n")
    unsent = held.renewal(30.0)
    assert unsent.output is not None
    held.restore_progress(unsent)  # that renewal never reached the database
    assert held.renewal(30.5).output == "one\ntwo\nthree\n"
    tail.write("four\n")
    assert held.settle()
    assert held.renewal(60.0).output is None  # settled: the outcome carries the output
