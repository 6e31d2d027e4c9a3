"""Every operator action from the command line is on record: who, when, what, and why.

``rota cancel`` and ``rota replay`` (one job, or the bulk forms: one row per
job), ``rota pause``, ``resume``, ``trigger``, ``backfill`` and ``prune``
each record their actor (the OS user at the host, or ``--actor NAME``) and
``--reason`` at the database clock; ``rota audit`` and ``GET /audit`` list
them, newest first. Both backends, through the real ``rota`` entry point.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from rota.cli.main import main
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.tables import jobs, operator_actions
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import job_row, job_type, states

REPORT = job_type("report.generate")
CLEANUP = job_type("nightly.cleanup")
HOST = socket.gethostname()

SCHEDULES = """\
job_types:
  report.generate:
    handler: m:f
  nightly.cleanup:
    handler: m:g
schedules:
  hourly:
    job_type: report.generate
    every: 1h
"""


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def alice(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Commands run as the login name "alice" ($LOGNAME is what getpass reads first)."""
    monkeypatch.setenv("LOGNAME", "alice")
    yield f"alice@{HOST}"


@pytest.fixture
def applied(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(SCHEDULES)
    assert rota(capsys, "apply", str(path), "--db", db_url)[0] == 0
    return path


def add(
    engine: Engine, spec: Any = REPORT, n: int = 1, *, state: str = "QUEUED"
) -> list[uuid.UUID]:
    """``n`` jobs of ``spec`` in ``state``; a finished one finished a day ago."""
    new = [NewJob.of_type(spec) for _ in range(n)]
    with engine.begin() as conn:
        insert_jobs_or_skip(conn, new)
        values: dict[str, Any] = {"state": state}
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            values.update(attempt_count=1, finished_at=datetime.now(UTC) - timedelta(days=1))
        conn.execute(update(jobs).where(jobs.c.job_id.in_([j.job_id for j in new])).values(values))
    return [j.job_id for j in new]


def audit(capsys: pytest.CaptureFixture[str], db_url: str, *argv: str) -> list[dict[str, Any]]:
    code, out, err = rota(capsys, "audit", "--json", "--db", db_url, *argv)
    assert code == 0, err
    entries: list[dict[str, Any]] = json.loads(out)
    return entries


def summary(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["action"], e["target_kind"], e["target"], e["actor"], e["reason"]) for e in entries]


def hour(ago: int) -> str:
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return (now - timedelta(hours=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_each_command_records_who_what_and_why_and_rota_audit_lists_them(
    engine: Engine,
    db_url: str,
    applied: Path,
    capsys: pytest.CaptureFixture[str],
    alice: str,
) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    (waiting,) = add(engine)
    (failed,) = add(engine, state="FAILED")
    bulk_failed = sorted(add(engine, CLEANUP, 3, state="FAILED"))
    db = ("--db", db_url)
    done = [
        rota(capsys, "cancel", str(waiting), "--reason", "not needed", *db),
        rota(capsys, "replay", str(failed), "--reason", "fixed", "--actor", "bob", *db),
        rota(capsys, "replay", "--type", "nightly.cleanup", "--reason", "INC-7", *db),
        rota(capsys, "cancel", "--type", "nightly.cleanup", "--reason", "drain", *db),
        rota(capsys, "pause", "hourly", "--reason", "upstream down", *db),
        rota(capsys, "resume", "hourly", "--reason", "upstream back", *db),
        rota(capsys, "trigger", "hourly", "--reason", "rerun by hand", *db),
        rota(capsys, "backfill", "hourly", "--from", hour(3), "--to", hour(1),
             "--reason", "missed in the outage", *db),
    ]  # fmt: skip
    for code, out, err in done:
        assert code == 0, (out, err)
    assert set(states(engine, bulk_failed).values()) == {"CANCELLED"}

    entries = audit(capsys, db_url)
    got = summary(entries)
    # Newest first; the bulk rows of one batch share their instant (their order is the id's).
    assert got[:4] == [
        ("backfill", "schedule", "hourly", alice, "missed in the outage"),
        ("trigger", "schedule", "hourly", alice, "rerun by hand"),
        ("resume", "schedule", "hourly", alice, "upstream back"),
        ("pause", "schedule", "hourly", alice, "upstream down"),
    ]
    bulk_cancel = sorted(got[4:7], key=lambda e: e[2])
    assert bulk_cancel == [("cancel", "job", str(j), alice, "drain") for j in bulk_failed]
    bulk_replay = sorted(got[7:10], key=lambda e: e[2])
    assert bulk_replay == [("replay", "job", str(j), alice, "INC-7") for j in bulk_failed]
    assert got[10:] == [
        ("replay", "job", str(failed), "bob", "fixed"),
        ("cancel", "job", str(waiting), alice, "not needed"),
    ]
    ats = [datetime.fromisoformat(e["at"].replace("Z", "+00:00")) for e in entries]
    assert ats == sorted(ats, reverse=True)
    assert before <= ats[-1] and ats[0] <= datetime.now(UTC) + timedelta(seconds=5)
    # What a backfill covered and which job a trigger made are kept beside the target.
    assert entries[0]["detail"].startswith(f"[{hour(3)}, {hour(1)})")
    triggered = job_row(engine, uuid.UUID(entries[1]["detail"].split()[-1]))
    assert triggered["schedule_name"] == "hourly"

    code, out, _ = rota(capsys, "audit", *db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["AT", "ACTOR", "ACTION", "TARGET", "REASON"]
    assert "backfill" in lines[1] and "schedule hourly" in lines[1]
    assert lines[1].rstrip().endswith("missed in the outage")
    assert "bob" in lines[-2] and f"job {failed}" in lines[-2] and lines[-2].endswith("fixed")

    # The same rows, over HTTP.
    with running_api(engine) as base:
        answer = loopback.get(f"{base}/audit", timeout=10).json()
    assert summary(answer["actions"]) == got


def test_prune_is_one_row_naming_the_jobs_it_chose(
    engine: Engine, db_url: str, applied: Path, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    old = add(engine, n=3, state="SUCCEEDED")
    (cancelled,) = add(engine)
    assert rota(capsys, "cancel", str(cancelled), "--db", db_url)[0] == 0
    code, _, err = rota(
        capsys, "prune", "--older-than", "1h", "--state", "SUCCEEDED",
        "--reason", "disk full", "--db", db_url,
    )  # fmt: skip
    assert code == 0, err
    assert states(engine, old) == {}
    code, _, err = rota(
        capsys, "prune", "--reason", "by retention", "--actor", "cron", "--db", db_url
    )
    assert code == 0, err
    got = summary(audit(capsys, db_url))
    assert got == [
        ("prune", "jobs", "finished jobs past their job type's retain", "cron", "by retention"),
        ("prune", "jobs", "SUCCEEDED jobs finished more than 1h ago", alice, "disk full"),
        ("cancel", "job", str(cancelled), alice, None),
    ]


def test_a_pruned_jobs_actions_go_with_it_and_the_prune_stays(
    engine: Engine, db_url: str, applied: Path, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    # A job's actions are kept as long as the job is: retention bounds both.
    (job,) = add(engine)
    assert rota(capsys, "cancel", str(job), "--db", db_url)[0] == 0
    with engine.begin() as conn:
        conn.execute(update(jobs).values(finished_at=datetime.now(UTC) - timedelta(days=2)))
    code, _, err = rota(capsys, "prune", "--older-than", "1d", "--db", db_url)
    assert code == 0, err
    assert summary(audit(capsys, db_url)) == [
        ("prune", "jobs", "jobs finished more than 1d ago", alice, None)
    ]


def test_dry_runs_and_refusals_record_nothing(
    engine: Engine, db_url: str, applied: Path, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    add(engine, state="FAILED")
    add(engine, state="SUCCEEDED")
    db = ("--db", db_url)
    for argv, code in [
        (["replay", "--state", "FAILED", "--dry-run"], 0),
        (["cancel", "--type", "report.generate", "--dry-run"], 0),
        (["prune", "--older-than", "1h", "--dry-run"], 0),
        (["backfill", "hourly", "--from", hour(3), "--to", hour(1), "--dry-run"], 0),
        (["backfill", "hourly", "--from", hour(3), "--to", hour(-2)], 2),  # the future
        (["pause", "nope", "--reason", "typo"], 2),
        (["trigger", "nope"], 2),
    ]:
        assert rota(capsys, *argv, *db)[0] == code, argv
    with engine.connect() as conn:
        assert conn.execute(select(operator_actions)).first() is None


@pytest.mark.parametrize(
    ("actor", "message"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("a\x00b", "NUL"),
        ("x" * 201, "at most 200 characters"),
        ("eve\x1b[2J", "control character (U+001B"),
        ("two\nlines", "control character (U+000A"),
    ],
)
def test_an_actor_that_cannot_be_kept_safely_is_refused(
    engine: Engine,
    db_url: str,
    applied: Path,
    capsys: pytest.CaptureFixture[str],
    actor: str,
    message: str,
) -> None:
    (job_id,) = add(engine)
    for argv in (
        ["cancel", str(job_id)],
        ["cancel", "--state", "QUEUED"],
        ["replay", "--state", "FAILED"],
        ["pause", "hourly"],
        ["resume", "hourly"],
        ["trigger", "hourly"],
        ["backfill", "hourly", "--from", hour(3), "--to", hour(1)],
        ["prune"],
    ):
        code, _, err = rota(capsys, *argv, "--db", db_url, "--actor", actor)
        assert code == 2, argv
        assert "--actor" in err and message in err and "Traceback" not in err, err
    assert states(engine) == {job_id: "QUEUED"}
    with engine.connect() as conn:
        assert conn.execute(select(operator_actions)).first() is None


def test_the_os_user_and_host_name_the_actor_without_actor(
    engine: Engine, db_url: str, applied: Path, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    assert rota(capsys, "trigger", "hourly", "--db", db_url)[0] == 0
    (entry,) = audit(capsys, db_url)
    assert entry["actor"] == alice == f"alice@{HOST}"
    assert entry["reason"] is None
