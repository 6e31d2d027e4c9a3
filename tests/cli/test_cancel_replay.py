"""``rota cancel`` and ``rota replay``: messages and exit codes."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.states import AttemptOutcome, JobState
from tests.support.executor_support import (
    add_jobs,
    attempt_rows,
    claim_as,
    job_row,
    job_type,
    store_types,
)


def test_cancel_queued_running_finished_and_unknown(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    ids = add_jobs(engine, spec, 2)
    (claimed,) = claim_as(engine, "w:1:x", 1)
    running = claimed.job_id
    (queued,) = [j for j in ids if j != running]
    assert main(["cancel", str(queued), "--db", db_url]) == 0
    assert "cancelled" in capsys.readouterr().out
    assert job_row(engine, queued)["state"] == "CANCELLED"
    assert main(["cancel", str(running), "--db", db_url]) == 0
    assert "requested" in capsys.readouterr().out
    assert job_row(engine, running)["state"] == "CANCEL_REQUESTED"
    assert main(["cancel", str(running), "--db", db_url]) == 0
    assert "already requested" in capsys.readouterr().out
    assert main(["cancel", str(queued), "--db", db_url]) == 0
    assert "already finished (CANCELLED)" in capsys.readouterr().out
    assert main(["cancel", str(uuid.uuid4()), "--db", db_url]) == 2
    assert "no job" in capsys.readouterr().err
    assert main(["cancel", "not-a-uuid", "--db", db_url]) == 2
    assert "not a job id" in capsys.readouterr().err


def test_replay_failed_job(engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = job_type("t", max_attempts=1)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    assert main(["replay", str(job_id), "--db", db_url]) == 2
    assert "only a FAILED job" in capsys.readouterr().err
    (c,) = claim_as(engine, "w:1:x", 1)
    with engine.begin() as conn:
        finish_if_lease_held(
            conn,
            owner="w:1:x",
            finishes=[
                Finish(
                    job_id, c.lease_generation, JobState.FAILED, AttemptOutcome.FAILED, "Bad", "x"
                )
            ],
        )
    assert main(["replay", str(job_id), "--db", db_url]) == 0
    assert "queued again" in capsys.readouterr().out
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 0
    assert len(attempt_rows(engine, job_id)) == 1
    assert main(["replay", str(uuid.uuid4()), "--db", db_url]) == 2


def test_executor_rejects_bad_options(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["executor", "--db", db_url, "--concurrency", "0"]) == 2
    assert "--concurrency" in capsys.readouterr().err
    assert main(["executor", "--db", db_url, "--pools", " , "]) == 2
    assert "--pools" in capsys.readouterr().err
