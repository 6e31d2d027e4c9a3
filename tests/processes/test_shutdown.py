"""Shutdown and child processes, with real ``rota executor`` processes and real signals.

* a drain timeout never runs a job twice at once: the release is written only
  after the handler has stopped; a handler that cannot be stopped keeps its
  lease, and the sweeper recovers the job only after the process has gone;
* a second SIGTERM/SIGINT ends the drain at once (handlers stopped first);
  the default drain timeout fits Kubernetes' 30 s grace period;
* children die with their executor: a ``command:`` child and an
  ``isolation: process`` child are gone soon after the executor is SIGKILLed.
"""

from __future__ import annotations

import itertools
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.core.config import Isolation
from rota.executor.service import DEFAULT_DRAIN_TIMEOUT
from tests.support.executor_support import (
    FAST_RETRY,
    Executors,
    add_jobs,
    alive,
    assert_dies_with_its_executor,
    attempt_rows,
    job_row,
    job_type,
    pid_in,
    store_types,
    wait_for,
)

pytestmark = pytest.mark.slow

H = "tests.handlers.lifecycle"


def runs(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def intervals(path: Path, exited: dict[str, float]) -> list[tuple[float, float]]:
    """(start, end) of every run; a run without an end ended when its process exited."""
    starts: dict[tuple[str, str], float] = {}
    ends: dict[tuple[str, str], float] = {}
    for r in runs(path):
        (starts if r[0] == "start" else ends)[(r[1], r[2])] = float(r[3])
    return sorted((s, ends.get(k, exited.get(k[0], float("inf")))) for k, s in starts.items())


def assert_disjoint(spans: list[tuple[float, float]]) -> None:
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"two runs of the job overlapped: {spans}"


def test_drain_timeout_releases_only_after_the_handler_has_stopped(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    """The handler ignores the executor for a moment after the drain timeout: the
    release waits for it, so the second executor can never start the job meanwhile.

    The first attempt is blind from the SIGTERM on (its ``go`` file) and then
    checks in until stopped, so a slow start of the second executor cannot let
    it finish before the drain does."""
    out = tmp_path / "runs.txt"
    go = tmp_path / "go"
    spec = job_type(
        "overlap",
        handler=f"{H}:blind_then_checkpoints",
        lease=timedelta(seconds=4),
        backoff=FAST_RETRY,
    )
    store_types(engine, spec)
    args = {
        "file": str(out),
        "go": str(go),
        "blind": 1.0,
        "seconds": 60.0,
        "later_seconds": 0.3,
        "first_only": True,
    }
    (job_id,) = add_jobs(engine, spec, args=args, concurrency_key="one-at-a-time")
    first = executors.start("--drain-timeout", "0.1", "--poll-interval", "0.1", ready=True)
    wait_for(lambda: runs(out), timeout=30, what="the handler to start")
    executors.start("--poll-interval", "0.1", "--sweep-interval", "0.3", ready=True)
    first.send_signal(signal.SIGTERM)
    go.touch()
    assert first.wait(30) == 0
    wait_for(
        lambda: job_row(engine, job_id)["state"] == "SUCCEEDED",
        timeout=30,
        what="the second executor to run the job",
    )
    spans = intervals(out, {})
    assert len(spans) == 2
    assert_disjoint(spans)
    assert [r[-1] for r in runs(out) if r[0] == "end"] == ["JobReleased", "done"]
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RELEASED", "SUCCEEDED"]


def test_a_handler_that_cannot_be_stopped_keeps_its_lease(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    """Never released while it may still run: the process exits holding the lease,
    and the sweeper hands the job on only after that lease has expired."""
    out = tmp_path / "runs.txt"
    spec = job_type(
        "stuck",
        handler=f"{H}:blind_then_checkpoints",
        lease=timedelta(seconds=4),
        backoff=FAST_RETRY,
    )
    store_types(engine, spec)
    args = {"file": str(out), "blind": 3600, "seconds": 0.0, "first_only": True}
    (job_id,) = add_jobs(engine, spec, args=args, concurrency_key="one-at-a-time")
    first = executors.start("--drain-timeout", "0.1", "--poll-interval", "0.1", ready=True)
    wait_for(lambda: runs(out), timeout=30, what="the handler to start")
    executors.start("--poll-interval", "0.1", "--sweep-interval", "0.3", ready=True)
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0
    exited_at = time.time()
    assert job_row(engine, job_id)["state"] in ("RUNNING", "RETRY_WAIT", "SUCCEEDED")
    assert "event=release_withheld" in executors.logs()
    wait_for(
        lambda: job_row(engine, job_id)["state"] == "SUCCEEDED",
        timeout=30,
        what="the sweeper and the second executor to finish the job",
    )
    spans = intervals(out, {str(first.pid): exited_at})
    assert len(spans) == 2
    assert_disjoint(spans)
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["LEASE_EXPIRED", "SUCCEEDED"]
    row = job_row(engine, job_id)
    assert row["attempt_count"] == 2


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_ends_the_drain_at_once(
    engine: Engine, executors: Executors, tmp_path: Path, second: signal.Signals
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type("loop", handler=f"{H}:checkpoint_loop")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    # A drain far longer than the hang guard below: only the second signal can end it.
    proc = executors.start("--drain-timeout", "3600", "--poll-interval", "0.1", ready=True)
    wait_for(lambda: runs(out), timeout=30, what="the handler to start")
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "event=draining" in executors.logs(), timeout=30, what="the drain")
    assert proc.poll() is None and job_row(engine, job_id)["state"] == "RUNNING"
    proc.send_signal(second)
    assert proc.wait(60) == 0
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 0 and row["lease_owner"] is None
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RELEASED"]
    assert [r[-1] for r in runs(out) if r[0] == "end"] == ["JobReleased"]
    assert "event=drain_cut_short" in executors.logs()


def test_the_default_drain_timeout_fits_kubernetes_grace_period(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert DEFAULT_DRAIN_TIMEOUT == 25.0  # Kubernetes' terminationGracePeriodSeconds: 30
    assert main(["executor", "--help"]) == 0  # main returns argparse's exit code
    assert "default 25, inside Kubernetes' 30 s grace" in " ".join(capsys.readouterr().out.split())


def test_a_command_child_assert_dies_with_its_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    pidfile = tmp_path / "child.pid"
    spec = job_type(
        "cmd",
        handler=None,
        command=(
            "sh",
            "-c",
            f'echo $$ > "{pidfile}.tmp" && mv "{pidfile}.tmp" "{pidfile}" && exec sleep 300',
        ),
    )
    store_types(engine, spec)
    add_jobs(engine, spec)
    assert_dies_with_its_executor(executors, pids, "command", lambda: pid_in(pidfile))


def test_a_process_isolated_child_assert_dies_with_its_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type("iso", handler=f"{H}:pid_then_wait", isolation=Isolation.PROCESS)
    store_types(engine, spec)
    add_jobs(engine, spec, args={"file": str(out)})
    assert_dies_with_its_executor(
        executors, pids, "child", lambda: int(runs(out)[0][1]) if runs(out) else None
    )


def test_nothing_is_left_running_after_a_graceful_stop(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    """SIGTERM with a stuck process-isolated handler: the child is killed, the job released."""
    out = tmp_path / "runs.txt"
    spec = job_type("iso", handler=f"{H}:pid_then_wait", isolation=Isolation.PROCESS)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    proc = executors.start("--drain-timeout", "0.1", "--poll-interval", "0.1")
    wait_for(lambda: runs(out), timeout=30, what="the child to start")
    pid = int(runs(out)[0][1])
    pids.append(pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not alive(pid)
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RELEASED"]
    assert job_row(engine, job_id)["state"] == "QUEUED"
