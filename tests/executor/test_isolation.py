"""``isolation: process``: each run of a Python handler in a child process of its own.

On both backends, with real child processes (the executor runs in-process):
the field is read, checked and stored; the child gets a working ctx
(checkpoint, progress, cancel) and reports outcomes as a thread would; a stuck
handler is killed on timeout and its slot freed; a crash (``os._exit``, a
segfault) costs one attempt with a clear code and never the executor; a
cancellation reaches the child (and kills it after a grace); shutdown kills it.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from rota.core.config import Isolation, JobTypeSpec
from rota.core.queries.jobs_control import request_cancel
from rota.executor.child import ChildJob
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import executor_support as support
from tests.support.executor_support import (
    FAST_RETRY,
    SLOW_RETRY,
    StartExecutor,
    add_jobs,
    alive,
    attempt_rows,
    claimed_job,
    job_row,
    job_type,
    lines,
    run_in_thread,
    state_is,
    store_types,
    wait_for,
)

H = "tests.handlers.lifecycle"


def isolated(name: str, handler: str, **kwargs: Any) -> JobTypeSpec:
    kwargs.setdefault("backoff", SLOW_RETRY)
    return job_type(name, handler=f"{H}:{handler}", isolation=Isolation.PROCESS, **kwargs)


# -- the field --------------------------------------------------------------


FILE = """\
job_types:
  iso:
    handler: tests.handlers.lifecycle:segfault
    isolation: process
  plain:
    handler: tests.handlers.lifecycle:segfault
"""


def test_the_isolation_field_is_read_and_stored_with_the_job_type() -> None:
    sf = load_schedule_text(FILE, "f.yaml")
    iso, plain = sf.job_types["iso"], sf.job_types["plain"]
    assert iso.isolation is Isolation.PROCESS and plain.isolation is Isolation.THREAD
    assert iso.to_json()["isolation"] == "process"
    assert "isolation" not in plain.to_json()  # definitions stored before it read back equal
    assert JobTypeSpec.from_json(iso.to_json()) == iso
    assert JobTypeSpec.from_json(plain.to_json()) == plain


@pytest.mark.parametrize(
    ("lines_", "message"),
    [
        (["    handler: a:b", "    isolation: fork"], "f.yaml:4: job type 'x', isolation: 'fork'"),
        (
            ["    command: [true]", "    isolation: process"],
            "f.yaml:4: job type 'x', isolation: is for Python handlers",
        ),
    ],
)
def test_a_bad_isolation_is_refused_with_its_line(lines_: list[str], message: str) -> None:
    text = "\n".join(["job_types:", "  x:", *lines_]) + "\n"
    with pytest.raises(ConfigError) as err:
        load_schedule_text(text, "f.yaml")
    assert message in str(err.value)


def test_the_child_starts_without_the_database_layer() -> None:
    # What the child runs before the handler: its module, then the job it is sent
    # unpickled. Every isolated job pays for that start, so SQLAlchemy and the
    # driver (about 0.2 s of it) stay out.
    claimed = claimed_job(
        job_type="iso", max_attempts=3, args={"k": 1}, scheduled_for=datetime.now(UTC)
    )
    job = ChildJob(
        claimed, isolated("iso", "checkpoint_loop"), f"{H}:checkpoint_loop", "handler", [], 20
    )
    probe = (
        "import pickle, sys\n"
        "import rota.executor.child\n"
        "job = pickle.loads(sys.stdin.buffer.read())\n"
        "assert job.claimed.args == {'k': 1}, job\n"
        "print(sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'psycopg'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], input=pickle.dumps(job), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[]"


# -- running ----------------------------------------------------------------


def test_the_child_gets_a_working_context(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    spec = isolated("ctx", "pid_and_context", lease=timedelta(seconds=1))
    store_types(engine, spec)
    (job_id,) = add_jobs(
        engine, spec, args={"file": str(out), "linger": 1.5}, payload_ref="s3://in/1"
    )
    start_executor()
    wait_for(lambda: lines(out), what="the handler to run")
    wait_for(lambda: job_row(engine, job_id)["progress_stage"] == "HALF", what="progress")
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    seen = json.loads(lines(out)[0])
    assert seen["pid"] != os.getpid() and seen["pgid"] == seen["pid"]  # a group of its own
    assert seen["job_id"] == str(job_id) and seen["job_type"] == "ctx"
    assert seen["attempt"] == 1 and seen["payload_ref"] == "s3://in/1"
    assert seen["args"]["linger"] == 1.5
    assert seen["key"] == f"rota:{job_id}:charge"
    row = job_row(engine, job_id)
    assert row["result_ref"] == f"s3://results/{job_id}"
    assert (row["progress_done"], row["progress_total"]) == (1, 2)


def test_errors_keep_their_kind_code_and_traceback(
    engine: Engine, start_executor: StartExecutor
) -> None:
    perm = isolated("perm", "raises_permanent")
    other = isolated("other", "raises_other")
    store_types(engine, perm, other)
    (p,) = add_jobs(engine, perm)
    (o,) = add_jobs(engine, other)
    start_executor()
    wait_for(state_is(engine, p, "FAILED"), what="FAILED")
    wait_for(state_is(engine, o, "RETRY_WAIT"), what="RETRY_WAIT")
    prow, orow = job_row(engine, p), job_row(engine, o)
    assert prow["last_error_code"] == "BAD_INPUT"
    assert "raises_permanent" in prow["last_error_detail"]  # the child's traceback
    assert orow["last_error_code"] == "KeyError"
    assert "raises_other" in orow["last_error_detail"]


def test_async_handler_runs_in_the_child(engine: Engine, start_executor: StartExecutor) -> None:
    spec = isolated("aio", "async_returns")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    assert job_row(engine, job_id)["result_ref"] == "s3://async/result"


def test_the_childs_log_lines_reach_the_executors_log(
    engine: Engine, start_executor: StartExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    spec = isolated("logs", "logs_a_line")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    found = [r for r in caplog.records if r.name == "tests.child"]
    assert [r.getMessage() for r in found] == ["hello from the child"]
    assert found[0].levelno == logging.WARNING


def test_a_stuck_handler_is_killed_on_timeout_and_its_slot_freed(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, pids: list[int]
) -> None:
    out = tmp_path / "out.txt"
    stuck = isolated("stuck", "pid_then_wait", timeout=timedelta(seconds=2), max_attempts=1)
    after = isolated("after", "pid_and_context")
    store_types(engine, stuck, after)
    (job_id,) = add_jobs(engine, stuck, args={"file": str(out), "seconds": 3600})
    start_executor(concurrency=1, prefetch=0)
    wait_for(lambda: lines(out), timeout=20, what="the handler to start")
    pid = int(lines(out)[0].split()[1])
    pids.append(pid)
    wait_for(state_is(engine, job_id, "FAILED"), timeout=20, what="the timeout")
    assert job_row(engine, job_id)["last_error_code"] == "TIMEOUT"
    wait_for(lambda: not alive(pid), timeout=10, what="the stuck child to be killed")
    # The only slot is free again: the next job runs.
    (next_id,) = add_jobs(engine, after, args={"file": str(tmp_path / "next.txt")})
    wait_for(state_is(engine, next_id, "SUCCEEDED"), timeout=20, what="the next job")


@pytest.mark.parametrize(
    ("handler", "code"),
    [("exit_hard", "CHILD_EXIT_3"), ("segfault", "CHILD_SIGSEGV")],
)
def test_a_crash_costs_one_attempt_and_never_the_executor(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, handler: str, code: str
) -> None:
    out = tmp_path / "out.txt"
    crash = isolated("crash", handler, max_attempts=2)
    after = isolated("after", "pid_and_context")
    store_types(engine, crash, after)
    (job_id,) = add_jobs(engine, crash, args={"file": str(out)})
    start_executor(concurrency=1, prefetch=0)
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), timeout=20, what="the crash's outcome")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == code and row["attempt_count"] == 1
    assert "pid" in row["last_error_detail"]
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RETRY"]
    (next_id,) = add_jobs(engine, after, args={"file": str(tmp_path / "next.txt")})
    wait_for(state_is(engine, next_id, "SUCCEEDED"), timeout=20, what="the next job")


def test_cancel_reaches_the_childs_checkpoint(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    spec = isolated("loop", "checkpoint_loop")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(lambda: lines(out), timeout=20, what="the handler to start")
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    wait_for(state_is(engine, job_id, "CANCELLED"), timeout=20, what="CANCELLED")
    assert lines(out)[-1].split()[-1] == "JobCancelled"
    assert attempt_rows(engine, job_id)[-1]["outcome"] == "CANCELLED"


def test_cancel_kills_a_child_that_does_not_check_in(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, pids: list[int]
) -> None:
    out = tmp_path / "out.txt"
    spec = isolated("blind", "pid_then_wait")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out), "seconds": 3600})
    start_executor()
    wait_for(lambda: lines(out), timeout=20, what="the handler to start")
    pid = int(lines(out)[0].split()[1])
    pids.append(pid)
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    wait_for(state_is(engine, job_id, "CANCELLED"), timeout=20, what="CANCELLED")
    assert not alive(pid)


def test_shutdown_kills_the_child_then_releases_the_job(
    engine: Engine, tmp_path: Path, pids: list[int]
) -> None:
    out = tmp_path / "out.txt"
    spec = isolated("blind", "pid_then_wait")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out), "seconds": 3600})
    _ex, stop, t = run_in_thread(engine, poll_interval=0.05, drain_timeout=0.1, daemon=False)
    wait_for(lambda: lines(out), timeout=20, what="the handler to start")
    pid = int(lines(out)[0].split()[1])
    pids.append(pid)
    stop.set()
    t.join(20)
    assert not t.is_alive()
    assert not alive(pid)
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 0
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RELEASED"]


def test_a_child_killed_from_outside_costs_one_attempt(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, pids: list[int]
) -> None:
    """SIGKILL from outside, as the kernel's OOM killer sends it."""
    out = tmp_path / "out.txt"
    spec = isolated("victim", "pid_then_wait", max_attempts=2)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out), "seconds": 3600})
    start_executor()
    wait_for(lambda: lines(out), timeout=20, what="the handler to start")
    pid = int(lines(out)[0].split()[1])
    pids.append(pid)
    os.kill(pid, signal.SIGKILL)
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), timeout=20, what="the outcome")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "CHILD_SIGKILL"
    assert "OOM killer" in row["last_error_detail"]


def test_a_memory_blowup_fails_the_attempt_in_the_child(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    hog = isolated("hog", "eats_memory", max_attempts=2)
    after = isolated("after", "pid_and_context")
    store_types(engine, hog, after)
    (job_id,) = add_jobs(engine, hog, args={"file": str(out)})
    start_executor(concurrency=1, prefetch=0)
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), timeout=20, what="the outcome")
    assert job_row(engine, job_id)["last_error_code"] == "MemoryError"
    assert not any(line.startswith("allocated") for line in lines(out))
    (next_id,) = add_jobs(engine, after, args={"file": str(tmp_path / "next.txt")})
    wait_for(state_is(engine, next_id, "SUCCEEDED"), timeout=20, what="the next job")


def test_the_reconcile_hook_runs_in_a_child_too(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    spec = job_type(
        "amb",
        handler="tests.handlers.plain:ambiguous_first",
        reconcile="tests.handlers.plain:reconcile_done",
        isolation=Isolation.PROCESS,
        backoff=FAST_RETRY,
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), timeout=30, what="SUCCEEDED")
    assert lines(out) == ["reconcile 2"]
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["AMBIGUOUS", "RECONCILED"]


def test_alive_is_false_for_a_process_reaped_while_its_stat_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The test helper ``alive``: a process that exits and is reaped between the open
    and the read of its /proc stat file is gone (the read fails with ESRCH), not an
    error in the test that asked (seen once in CI, on a killed isolated handler)."""
    child = subprocess.Popen(["sleep", "60"])
    real_open = open

    def open_then_reap(path: str, *args: Any, **kwargs: Any) -> Any:
        f = real_open(path, *args, **kwargs)
        child.kill()
        child.wait(10)
        return f

    monkeypatch.setattr(support, "open", open_then_reap, raising=False)
    assert support.alive(child.pid) is False
