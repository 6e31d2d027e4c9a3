"""Rolling deploys: an executor never claims a job type whose handler it cannot import.

* a real executor process without the handler's module leaves the job QUEUED
  (no attempt spent, never HANDLER_IMPORT_ERROR) and logs the type once, while
  it keeps running other types; a second executor with the module runs it;
* a later reload of a changed job type retries the import and claims the job;
* a job of a type the executor had not seen yet is handed back, attempt refunded;
* ``rota check --import-handlers FILE`` names each handler that does not import,
  with ``file:line``, and exits 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.executor.service import Executor
from tests.support.executor_support import (
    REPO_ROOT,
    add_jobs,
    attempt_rows,
    job_row,
    job_type,
    stop_gracefully,
    store_types,
    subprocess_env,
    wait_for,
)

HANDLER_SOURCE = "def work(ctx):\n    return None\n"


def new_module(directory: Path) -> str:
    """A handler module only ``directory`` holds; returns its handler path."""
    name = f"rota_deploy_{uuid.uuid4().hex[:12]}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(HANDLER_SOURCE)
    return f"{name}:work"


class Procs:
    def __init__(self, db_url: str, tmp_path: Path) -> None:
        self.db_url = db_url
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, pythonpath: Path | None) -> tuple[subprocess.Popen[bytes], Path]:
        log_path = self.tmp_path / f"{name}.log"
        cwd = self.tmp_path / f"{name}-cwd"  # rota resolves handlers from its cwd too
        cwd.mkdir()
        env = subprocess_env(self.db_url)
        if pythonpath is not None:
            env["PYTHONPATH"] = str(pythonpath) + os.pathsep + env["PYTHONPATH"]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; from rota.cli.main import main; sys.exit(main())",
                    "executor",
                    "--poll-interval",
                    "0.1",
                ],
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        wait_for(
            lambda: "event=executor_started" in log_path.read_text() or proc.poll() is not None,
            timeout=30,
            what=f"{name} to start",
        )
        assert proc.poll() is None, log_path.read_text()
        return proc, log_path

    def stop_all(self) -> None:
        stop_gracefully(self.procs, 30)


@pytest.fixture
def procs(db_url: str, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(db_url, tmp_path)
    yield p
    p.stop_all()


@pytest.mark.slow
def test_old_executor_leaves_the_job_queued_for_one_that_can_import(
    engine: Engine, procs: Procs, tmp_path: Path
) -> None:
    new_code = tmp_path / "new-image"
    handler = new_module(new_code)
    new_type = job_type("report.v2", handler=handler)
    old_type = job_type("ping", command=(sys.executable, "-c", "pass"), handler=None)
    store_types(engine, new_type, old_type)
    (job,) = add_jobs(engine, new_type)

    old, old_log = procs.start("old", pythonpath=None)
    # The old executor has claimed since it started: this job of a type it can run proves it.
    (ping,) = add_jobs(engine, old_type)
    wait_for(lambda: job_row(engine, ping)["state"] == "SUCCEEDED", 30, "the ping to run")
    row = job_row(engine, job)
    assert (row["state"], row["attempt_count"], row["last_error_code"]) == ("QUEUED", 0, None)
    assert attempt_rows(engine, job) == []
    text = old_log.read_text()
    unavailable = [ln for ln in text.splitlines() if "event=handler_unavailable" in ln]
    assert len(unavailable) == 1, text
    assert "job_type=report.v2" in unavailable[0] and handler.split(":")[0] in unavailable[0]
    assert "HANDLER_IMPORT_ERROR" not in text and "Traceback" not in text

    new, _ = procs.start("new", pythonpath=new_code)
    wait_for(lambda: job_row(engine, job)["state"] == "SUCCEEDED", 30, "the new executor")
    (attempt,) = attempt_rows(engine, job)
    assert attempt["outcome"] == "SUCCEEDED"
    assert f":{new.pid}:" in attempt["worker_id"]
    assert old.poll() is None  # still running, and still claiming nothing of that type
    assert job_row(engine, job)["attempt_count"] == 1


def test_reload_retries_the_import_and_claims(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    later = tmp_path / "later"
    later.mkdir()
    monkeypatch.syspath_prepend(str(later))
    name = f"rota_deploy_{uuid.uuid4().hex[:12]}"
    spec = job_type("late", handler=f"{name}:work")
    store_types(engine, spec)
    (job,) = add_jobs(engine, spec)
    ex = Executor(engine, concurrency=2, listen=False)
    ex.start()
    try:
        assert ex.unrunnable_types() == {"late"}
        assert ex.claim_once() == 0
        assert job_row(engine, job)["state"] == "QUEUED"
        # The module arrives, and the job type is applied again (changed): the reload retries.
        (later / f"{name}.py").write_text(HANDLER_SOURCE)
        store_types(engine, job_type("late", handler=f"{name}:work", timeout=timedelta(minutes=5)))
        ex.reload_job_types()
        assert ex.unrunnable_types() == set()
        assert ex.claim_once() == 1
        assert ex.wait_idle(10)
        assert job_row(engine, job)["state"] == "SUCCEEDED"
    finally:
        ex.shutdown(drain_timeout=5)


def test_a_type_applied_after_start_is_handed_back_not_failed(engine: Engine) -> None:
    ex = Executor(engine, concurrency=2, listen=False)
    ex.start()
    try:
        spec = job_type("fresh", handler="rota_deploy_module_that_does_not_exist:work")
        store_types(engine, spec)
        (job,) = add_jobs(engine, spec)
        ex.claim_once()  # may take it: this process had not seen the type yet
        assert ex.wait_idle(10)
        row = job_row(engine, job)
        assert (row["state"], row["attempt_count"], row["last_error_code"]) == ("QUEUED", 0, None)
        assert ex.unrunnable_types() == {"fresh"}
        assert ex.claim_once() == 0
        assert job_row(engine, job)["state"] == "QUEUED"
    finally:
        ex.shutdown(drain_timeout=5)


def test_check_import_handlers_names_each_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    path = tmp_path / "s.yaml"
    path.write_text(
        "job_types:\n"
        "  fine:\n"
        "    handler: tests.handlers.plain:noop\n"
        "  gone:\n"
        "    pool: reports\n"
        "    handler: rota_no_such_module_x:work\n"
        "  typo:\n"
        "    handler: tests.handlers.plain:no_such_function\n"
        "  hook:\n"
        "    handler: tests.handlers.plain:noop\n"
        "    idempotent: false\n"
        "    reconcile: rota_no_such_module_y:done\n"
        "  shell:\n"
        "    command: [/bin/true]\n"
        "schedules: {}\n"
    )
    assert main(["check", str(path)]) == 0  # without the flag, nothing is imported
    capsys.readouterr()
    assert main(["check", "--import-handlers", str(path)]) == 2
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 3, err
    assert lines[0].startswith(f"{path}:6: job type 'gone': handler rota_no_such_module_x:work")
    assert "No module named 'rota_no_such_module_x'" in lines[0]
    assert lines[1].startswith(f"{path}:8: job type 'typo': handler ")
    assert "has no no_such_function" in lines[1]
    assert lines[2].startswith(f"{path}:12: job type 'hook': reconcile rota_no_such_module_y:done")
    assert "Traceback" not in err


def test_check_import_handlers_passes_when_all_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    path = tmp_path / "s.yaml"
    path.write_text("job_types:\n  fine:\n    handler: tests.handlers.plain:noop\nschedules: {}\n")
    assert main(["check", "--import-handlers", str(path)]) == 0
    assert "1 handler imports" in capsys.readouterr().out
