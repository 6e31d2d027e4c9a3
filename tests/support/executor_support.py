"""Helpers shared by the executor tests: job types, jobs, reading rows back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Engine, select

from rota.core.claimed import ClaimedJob, Renewal
from rota.core.config import Backoff, JobTypeSpec
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.jobs_lease import renew_leases_if_held
from rota.core.states import JobState
from rota.core.tables import job_attempts, jobs
from rota.executor.claim import ScanStarts, claim_jobs
from rota.executor.service import Executor
from rota.executor.transactions import LoopConnection

REPO_ROOT = Path(__file__).resolve().parents[2]

# Backoffs of the tests' job types: a retry at once (the next attempt runs within
# the test), or not for an hour (the job stays RETRY_WAIT, its first attempt is read).
FAST_RETRY = Backoff(base=timedelta(milliseconds=10), max=timedelta(milliseconds=20))
SLOW_RETRY = Backoff(base=timedelta(hours=1), max=timedelta(hours=1))


def job_type(name: str = "t", **kwargs: Any) -> JobTypeSpec:
    kwargs.setdefault("handler", "tests.handlers.plain:noop")
    kwargs.setdefault("backoff", Backoff(base=timedelta(seconds=5), max=timedelta(minutes=15)))
    return JobTypeSpec(name=name, **kwargs)


def store_types(engine: Engine, *specs: JobTypeSpec) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, specs)


def add_jobs(engine: Engine, spec: JobTypeSpec, n: int = 1, **kwargs: Any) -> list[uuid.UUID]:
    new = [NewJob.of_type(spec, **kwargs) for _ in range(n)]
    with engine.begin() as conn:
        for i in range(0, len(new), 500):
            insert_jobs_or_skip(conn, new[i : i + 500])
    return [j.job_id for j in new]


def claim_as(
    engine: Engine,
    owner: str,
    limit: int,
    pools: Iterable[str] = ("default",),
    *,
    tenant_limit: int | None = None,
    now: datetime | None = None,
    starts: ScanStarts | None = None,
) -> list[ClaimedJob]:
    """Claim as an executor does (``claim_jobs``: lock-free first, then the limited claim)."""
    db = LoopConnection(engine)
    try:
        return claim_jobs(
            db,
            owner=owner,
            pools=tuple(pools),
            limit=limit,
            tenant_limit=tenant_limit,
            now=now,
            starts=starts,
        )
    finally:
        db.close()


def renew_as(
    engine: Engine, owner: str, job_id: uuid.UUID, generation: int, **carried: Any
) -> dict[uuid.UUID, JobState]:
    """Renew one lease as ``owner``'s heartbeat does, carrying ``carried`` (progress, the
    output so far); the renewed jobs' states."""
    with engine.begin() as conn:
        renewal = Renewal(job_id, generation, **carried)
        return renew_leases_if_held(conn, owner=owner, renewals=[renewal])


def claimed_job(**fields: Any) -> ClaimedJob:
    """A claimed job that is in no database, for the code that only holds one."""
    defaults: dict[str, Any] = {
        "job_id": uuid.uuid4(),
        "job_type": "t",
        "pool": "default",
        "lease_generation": 1,
        "attempt": 1,
        "max_attempts": 5,
        "lease_seconds": 60.0,
        "idempotent": True,
        "needs_reconcile": False,
        "payload_ref": None,
        "args": {},
        "scheduled_for": None,
        "covers_from": None,
        "covers_count": None,
        "last_error_code": None,
        "tenant": None,
        "concurrency_key": None,
    }
    return ClaimedJob(**{**defaults, **fields})


def job_row(engine: Engine, job_id: uuid.UUID) -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(select(jobs).where(jobs.c.job_id == job_id)).mappings().one()
    return dict(row)


def attempt_rows(engine: Engine, job_id: uuid.UUID) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(job_attempts)
            .where(job_attempts.c.job_id == job_id)
            .order_by(job_attempts.c.lease_generation)
        ).mappings()
        return [dict(r) for r in rows]


def states(engine: Engine, ids: Iterable[uuid.UUID] | None = None) -> dict[uuid.UUID, str]:
    with engine.connect() as conn:
        q = select(jobs.c.job_id, jobs.c.state)
        rows = conn.execute(q).all()
    wanted = None if ids is None else set(ids)
    return {r[0]: r[1] for r in rows if wanted is None or r[0] in wanted}


def state_is(engine: Engine, job_id: uuid.UUID, *wanted: str) -> Callable[[], bool]:
    """A condition for ``wait_for``: the job is in one of the ``wanted`` states."""
    return lambda: job_row(engine, job_id)["state"] in wanted


def lines(path: Path) -> list[str]:
    """The lines a handler wrote to ``path`` so far (none before it exists)."""
    return path.read_text().splitlines() if path.exists() else []


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``cond`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def subprocess_env(db_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["ROTA_DATABASE_URL"] = db_url
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


class InThread(NamedTuple):
    """An in-process Executor running in a thread of its own (unpacks as ``ex, stop, t``)."""

    executor: Executor
    stop: threading.Event
    thread: threading.Thread


def run_in_thread(engine: Engine, *args: Any, daemon: bool = True, **kwargs: Any) -> InThread:
    """Start ``Executor(engine, *args, **kwargs).run`` in a thread; the caller sets ``stop``
    (as SIGTERM does) and joins the thread."""
    executor = Executor(engine, *args, **kwargs)
    stop = threading.Event()
    thread = threading.Thread(target=executor.run, args=(stop,), daemon=daemon)
    thread.start()
    return InThread(executor, stop, thread)


def stop_once_started(engine: Engine, out: Path, drain_timeout: float) -> None:
    """Run an in-process Executor until a handler has written to ``out``, then stop it
    as SIGTERM does (``drain_timeout`` for what runs) and wait for it to end."""
    _ex, stop, thread = run_in_thread(
        engine, poll_interval=0.05, drain_timeout=drain_timeout, daemon=False
    )
    wait_for(lambda: lines(out), what="the handler to start")
    stop.set()
    thread.join(max(10.0, drain_timeout + 5.0))


StartExecutor = Callable[..., Executor]


@contextmanager
def running_executors(engine: Engine) -> Iterator[StartExecutor]:
    """``start(**options)`` runs an in-process Executor in a thread; all stop at the end."""
    running: list[InThread] = []

    def start(**kwargs: Any) -> Executor:
        kwargs.setdefault("poll_interval", 0.05)
        kwargs.setdefault("sweep_interval", 0.2)
        running.append(run_in_thread(engine, **kwargs))
        return running[-1].executor

    try:
        yield start
    finally:
        for r in running:
            r.stop.set()
        for r in running:
            r.thread.join(15)


class Executors:
    """Starts ``rota executor`` processes; kills whatever is left at the end."""

    def __init__(self, db_url: str, logdir: Path) -> None:
        self.db_url = db_url
        self.logdir = logdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, *options: str, ready: bool = False, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start one (``env`` added to its environment only); with ``ready``, return
        once it runs (signal handlers installed)."""
        path = self.logdir / f"executor-{len(self.procs)}.log"
        log = open(path, "wb")  # noqa: SIM115
        level = "INFO" if ready else "WARNING"
        proc = subprocess.Popen(
            [sys.executable, "-m", "rota.cli.main", "executor", "--log-level", level, *options],
            cwd=REPO_ROOT,
            env=subprocess_env(self.db_url, **(env or {})),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        if ready:
            wait_for(
                lambda: "event=executor_started" in path.read_text() or proc.poll() is not None,
                timeout=30,
                what="the executor to start",
            )
            assert proc.poll() is None, path.read_text()
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.logdir.glob("executor-*.log")))

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def stop_gracefully(procs: Iterable[subprocess.Popen[Any]], timeout: float) -> None:
    """SIGTERM to every process still running, then wait ``timeout`` s for each; one
    that does not end by then is killed."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or the read
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_dies_with_its_executor(
    executors: Executors, pids: list[int], what: str, pid_of: Callable[[], int | None]
) -> None:
    """Start an executor, wait until ``pid_of()`` names the process under test (a
    command, a child, a grandchild), SIGKILL the executor: that process must go too."""
    proc = executors.start("--poll-interval", "0.1")
    pid: int = wait_for(pid_of, timeout=30, what=f"the {what} to start")
    pids.append(pid)
    assert pid != proc.pid and alive(pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    wait_for(lambda: not alive(pid), timeout=10, what=f"the {what} (pid {pid}) to die")


def pid_in(path: Path) -> int | None:
    """The pid a test's process wrote to ``path``, once it has."""
    return int(path.read_text()) if path.exists() else None
