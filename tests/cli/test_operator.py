"""The command line as an operator's tool, through the real ``rota`` entry point, both backends.

Job filters, id prefixes, apply's field diff and exit code, skip counts by
reason, preview of the applied schedule, reasons kept with the OS user, bulk
cancel and replay, hostile command-line values.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, update

from rota.cli.main import main
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.jobs_read import JobFilter
from rota.core.queries.schedule_skips import SkipRecord, record_skips
from rota.core.states import SkipReason
from rota.core.tables import jobs, operator_actions
from rota.operations.jobs import bulk_replay
from tests.support.executor_support import (
    REPO_ROOT,
    claim_as,
    job_row,
    job_type,
    states,
    store_types,
    subprocess_env,
)
from tests.support.plan_support import captured_statements

REPORT = job_type("report.generate")
CLEANUP = job_type("nightly.cleanup")

SCHEDULES = """\
job_types:
  report.generate:
    handler: m:f
  nightly.cleanup:
    handler: m:g
schedules:
  nightly-report:
    job_type: report.generate
    cron: "0 2 * * *"
    timezone: Europe/Berlin
  hourly-cleanup:
    job_type: nightly.cleanup
    every: 1h
"""


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def alice(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Commands run as the login name "alice" ($LOGNAME is what getpass reads first),
    recorded as alice at this host."""
    monkeypatch.setenv("LOGNAME", "alice")
    yield f"alice@{socket.gethostname()}"


def add(
    engine: Engine,
    spec: Any = REPORT,
    n: int = 1,
    *,
    state: str = "QUEUED",
    ids: list[uuid.UUID] | None = None,
    created_ago: timedelta | None = None,
    **kwargs: Any,
) -> list[uuid.UUID]:
    """``n`` jobs of ``spec`` put in ``state`` (FAILED with its attempts spent)."""
    new = [NewJob.of_type(spec, **kwargs, **({"job_id": ids[i]} if ids else {})) for i in range(n)]
    with engine.begin() as conn:
        insert_jobs_or_skip(conn, new)
        values: dict[str, Any] = {"state": state}
        if state == "FAILED":
            values.update(attempt_count=spec.max_attempts, last_error_code="BOOM")
        if created_ago is not None:
            values["created_at"] = datetime.now(UTC) - created_ago
        conn.execute(update(jobs).where(jobs.c.job_id.in_([j.job_id for j in new])).values(values))
    return [j.job_id for j in new]


def applied(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(SCHEDULES)
    assert rota(capsys, "apply", str(path), "--db", db_url)[0] == 0
    return path


def listed(capsys: pytest.CaptureFixture[str], db_url: str, *argv: str) -> set[uuid.UUID]:
    code, out, err = rota(capsys, "jobs", "--db", db_url, "--json", *argv)
    assert code == 0, err
    return {uuid.UUID(j["job_id"]) for j in json.loads(out)}


# --- rota jobs: filters ---------------------------------------------------------


def test_jobs_filters_by_states_type_schedule_and_since(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    applied(tmp_path, db_url, capsys)
    failed = add(engine, state="FAILED", schedule_name="nightly-report")
    waiting = add(engine, state="RETRY_WAIT")
    queued_old = add(engine, created_ago=timedelta(hours=3))
    cleanup = add(engine, CLEANUP, schedule_name="hourly-cleanup")

    assert listed(capsys, db_url, "--state", "FAILED,retry_wait") == {*failed, *waiting}
    assert listed(capsys, db_url, "--state", "FAILED", "--state", "QUEUED") == {
        *failed,
        *queued_old,
        *cleanup,
    }
    assert listed(capsys, db_url, "--type", "nightly.cleanup") == set(cleanup)
    assert listed(capsys, db_url, "--schedule", "nightly-report") == set(failed)
    assert listed(capsys, db_url, "--since", "1h") == {*failed, *waiting, *cleanup}
    three_days_ago = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    assert len(listed(capsys, db_url, "--since", three_days_ago)) == 4
    assert listed(
        capsys, db_url, "--type", "report.generate", "--state", "QUEUED", "--since", "4h"
    ) == set(queued_old)

    _, out, _ = rota(capsys, "jobs", "--db", db_url, "--type", "nightly.cleanup")
    header, row = out.splitlines()
    assert header.split()[:4] == ["JOB", "ID", "TYPE", "SCHEDULE"]
    assert "hourly-cleanup" in row
    _, out, _ = rota(capsys, "jobs", "--db", db_url, "--state", "RETRY_WAIT")
    assert out.splitlines()[1].split()[2] == "-"  # an ad-hoc job has no schedule


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--schedule", "nightly-reprot"], "did you mean 'nightly-report'?"),
        (["--type", "report.generat"], "did you mean 'report.generate'?"),
        (["--state", "FIALED"], "did you mean FAILED?"),
        (["--state", "QUEUED,nope"], "unknown state 'nope'"),
        (["--since", "yesterday"], "neither a duration"),
        (["--since", "99999999999d"], "longer than 36525d"),
        (["--schedule", "x" * 201], "at most 200 characters"),
        (["--type", "a\x00b"], "NUL"),
    ],
)
def test_jobs_refuses_filters_that_name_nothing_with_close_names(
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    applied(tmp_path, db_url, capsys)
    code, _, err = rota(capsys, "jobs", "--db", db_url, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


# --- job ids: unique prefixes ----------------------------------------------------


TWINS = [
    uuid.UUID("abcdef01-0000-4000-8000-000000000001"),
    uuid.UUID("abcdef01-9000-4000-8000-000000000002"),
]
LONER = uuid.UUID("12345678-0000-4000-8000-00000000000a")


def test_job_ids_are_accepted_as_a_unique_prefix_everywhere(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    store_types(engine, REPORT)
    add(engine, n=2, ids=TWINS)
    (loner,) = add(engine, ids=[LONER], state="FAILED")

    code, out, _ = rota(capsys, "job", "12345678", "--db", db_url, "--json")
    assert code == 0 and json.loads(out)["job_id"] == str(loner)
    assert rota(capsys, "job", "1234-5678-00", "--db", db_url)[0] == 0  # dashes as printed
    assert rota(capsys, "job", "ABCDEF019", "--db", db_url)[0] == 0  # any case

    code, _, err = rota(capsys, "job", "abcdef01", "--db", db_url)
    assert code == 2
    assert "ambiguous" in err and str(TWINS[0]) in err and str(TWINS[1]) in err
    code, _, err = rota(capsys, "job", "abcdef0", "--db", db_url)
    assert code == 2 and "at least 8 hex digits" in err
    code, _, err = rota(capsys, "job", "99999999", "--db", db_url)
    assert code == 2 and "no job id starts with '99999999'" in err
    code, _, err = rota(capsys, "job", "abcdefgh", "--db", db_url)
    assert code == 2 and "not a job id" in err

    code, out, _ = rota(capsys, "replay", "12345678", "--db", db_url)
    assert code == 0 and f"{loner}: queued again" in out
    code, out, _ = rota(capsys, "cancel", "abcdef019", "--db", db_url)
    assert code == 0 and f"{TWINS[1]}: cancelled" in out
    code, _, err = rota(capsys, "cancel", "abcdef01", "--db", db_url)
    assert code == 2 and "ambiguous" in err
    assert states(engine, TWINS) == {TWINS[0]: "QUEUED", TWINS[1]: "CANCELLED"}


def test_the_prefix_lookup_is_a_range_scan_of_the_primary_key(
    engine: Engine, db_url: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store_types(engine, REPORT)
    add(engine, n=50)
    add(engine, ids=[LONER])
    with captured_statements(Engine) as sent:
        assert rota(capsys, "job", "12345678", "--db", db_url)[0] == 0
    seen = [(s, p) for s, p in sent if "FROM jobs" in s and "ORDER BY jobs.job_id" in s]
    (statement, parameters), *_ = seen
    with engine.connect() as conn:
        if backend == "sqlite":
            plan = " ".join(
                str(r[-1])
                for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            )
            assert "SEARCH jobs USING" in plan and "(job_id>? AND job_id<?)" in plan, plan
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")
            plan = " ".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement, parameters))
            assert "Index Cond: ((job_id >= " in plan and "job_id <= " in plan, plan


# --- rota apply: old -> new, --detailed-exitcode -------------------------------------


def test_apply_dry_run_shows_old_and_new_values_and_detailed_exitcode_gates_ci(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(SCHEDULES)
    code, out, _ = rota(
        capsys, "apply", str(path), "--db", db_url, "--dry-run", "--detailed-exitcode"
    )
    assert code == 3 and "+ nightly-report  (added)" in out
    assert rota(capsys, "apply", str(path), "--db", db_url, "--detailed-exitcode")[0] == 3
    code, out, _ = rota(capsys, "apply", str(path), "--db", db_url, "--detailed-exitcode")
    assert code == 0 and "0 added, 0 changed" in out
    assert (
        rota(capsys, "apply", str(path), "--db", db_url, "--dry-run", "--detailed-exitcode")[0] == 0
    )

    path.write_text(
        SCHEDULES.replace(
            'cron: "0 2 * * *"', 'cron: "30 3 * * *"\n    dst: {ambiguous: last}'
        ).replace(
            "    handler: m:g\n",
            "    handler: m:g\n    max_attempts: 2\n    backoff: {base: 10s}\n",
        )
    )
    code, out, _ = rota(
        capsys, "apply", str(path), "--db", db_url, "--dry-run", "--detailed-exitcode"
    )
    assert code == 3
    lines = [line.strip() for line in out.splitlines()]
    assert 'cron: "0 2 * * *" -> "30 3 * * *"' in lines
    assert 'dst: null -> {"ambiguous": "last", "nonexistent": "shift"}' in lines
    assert "job type nightly.cleanup: changed" in lines
    assert "max_attempts: 5 -> 2" in lines
    assert 'backoff.base: "5s" -> "10s"' in lines
    assert not any(line.startswith("backoff.max") for line in lines)
    assert "(dry run: nothing applied)" in out
    code, out, _ = rota(capsys, "apply", str(path), "--db", db_url, "--detailed-exitcode")
    assert code == 3 and "max_attempts: 5 -> 2" in out  # a real apply reports the same
    assert rota(capsys, "apply", str(path), "--db", db_url, "--detailed-exitcode")[0] == 0


def test_detailed_exitcode_keeps_2_for_a_bad_file(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SCHEDULES.replace("every: 1h", "every: often"))
    assert rota(capsys, "apply", str(path), "--db", db_url, "--detailed-exitcode")[0] == 2


# --- rota schedules, rota preview NAME --------------------------------------------------


def test_schedules_shows_skip_counts_by_reason_and_who_paused_and_why(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    applied(tmp_path, db_url, capsys)
    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    hour = timedelta(hours=1)
    with engine.begin() as conn:
        record_skips(
            conn,
            [
                SkipRecord("hourly-cleanup", SkipReason.MISFIRE, t0, t0 + 2 * hour, 3),
                SkipRecord("hourly-cleanup", SkipReason.PAUSED, t0 + 5 * hour, t0 + 13 * hour, 9),
                SkipRecord("hourly-cleanup", SkipReason.MISFIRE, t0 + 20 * hour, t0 + 20 * hour, 1),
            ],
        )
    code, _, _ = rota(
        capsys, "pause", "hourly-cleanup", "--db", db_url, "--reason", "upstream API down, INC-1234"
    )
    assert code == 0
    code, out, _ = rota(capsys, "schedules", "--db", db_url)
    block = out.split("hourly-cleanup", 1)[1].split("nightly-report")[0]
    assert "misfire 4, paused 9" in block
    assert f"last action: pause by {alice} at " in block
    assert block.rstrip().endswith(": upstream API down, INC-1234") or (
        ": upstream API down, INC-1234" in block
    )
    code, out, _ = rota(capsys, "schedules", "--db", db_url, "--json")
    (item,) = [d for d in json.loads(out) if d["name"] == "hourly-cleanup"]
    assert item["skipped_by_reason"] == {"misfire": 4, "paused": 9}
    assert item["last_action"]["actor"] == alice
    assert item["last_action"]["reason"] == "upstream API down, INC-1234"
    assert item["last_action"]["action"] == "pause"

    code, out, _ = rota(capsys, "resume", "hourly-cleanup", "--db", db_url, "--reason", "fixed")
    assert code == 0
    code, out, _ = rota(capsys, "schedules", "--db", db_url)
    assert f"last action: resume by {alice} at " in out and ": fixed" in out


def test_preview_name_alone_previews_the_schedule_as_applied(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys)
    start = "2026-03-28T00:00:00Z"
    code, from_db, err = rota(
        capsys,
        "preview",
        "nightly-report",
        "--db",
        db_url,
        "--from",
        start,
        "--count",
        "2",
        "--json",
    )
    assert code == 0, err
    assert [o["instant"] for o in json.loads(from_db)] == [
        "2026-03-28T01:00:00Z",
        "2026-03-29T01:00:00Z",  # 02:00 is in the DST gap: shifted to 03:00 CEST
    ]
    # The file changes, the database does not until applied: NAME alone follows the database.
    path.write_text(SCHEDULES.replace('cron: "0 2 * * *"', 'cron: "0 5 * * *"'))
    code, from_file, _ = rota(
        capsys, "preview", str(path), "nightly-report", "--from", start, "--count", "2", "--json"
    )
    assert code == 0 and json.loads(from_file)[0]["instant"] == "2026-03-28T04:00:00Z"
    code, again, _ = rota(
        capsys,
        "preview",
        "nightly-report",
        "--db",
        db_url,
        "--from",
        start,
        "--count",
        "2",
        "--json",
    )
    assert again == from_db
    code, interleaved, _ = rota(
        capsys, "preview", str(path), "--from", start, "--count", "2", "nightly-report", "--json"
    )
    assert code == 0 and interleaved == from_file  # options between FILE and NAME, as before

    assert rota(capsys, "pause", "nightly-report", "--db", db_url)[0] == 0
    code, out, _ = rota(capsys, "preview", "nightly-report", "--db", db_url, "--count", "1")
    assert code == 0 and "paused" in out.splitlines()[0]
    code, _, err = rota(capsys, "preview", "nightly-reprot", "--db", db_url)
    assert code == 2 and "did you mean 'nightly-report'?" in err
    code, _, err = rota(capsys, "preview", str(path), "--db", db_url)
    assert code == 2 and "rota preview" in err and "NAME" in err


# --- reasons: kept with the OS user and the time -------------------------------------------


def test_cancel_and_replay_keep_the_reason_the_os_user_and_the_time(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    store_types(engine, REPORT)
    (job_id,) = add(engine, state="FAILED")
    before = datetime.now(UTC) - timedelta(seconds=5)
    code, _, _ = rota(
        capsys, "replay", str(job_id), "--db", db_url, "--reason", "fixed the bug; retry"
    )
    assert code == 0
    code, _, _ = rota(
        capsys, "cancel", str(job_id), "--db", db_url, "--reason", "'; DROP TABLE jobs;-- ✓"
    )
    assert code == 0
    assert rota(capsys, "cancel", str(job_id), "--db", db_url, "--reason", "again")[0] == 0
    code, out, _ = rota(capsys, "job", str(job_id), "--db", db_url)
    actions = out.split("operator actions", 1)[1].strip().splitlines()
    assert len(actions) == 2  # the second cancel changed nothing and is not recorded
    assert actions[0].strip().startswith(f"replay by {alice} at ")
    assert actions[0].endswith(": fixed the bug; retry")
    assert actions[1].strip().startswith(f"cancel by {alice} at ")
    assert actions[1].endswith(": '; DROP TABLE jobs;-- ✓")
    code, out, _ = rota(capsys, "job", str(job_id)[:8], "--db", db_url, "--json")
    recorded = json.loads(out)["operator_actions"]
    assert [(a["action"], a["actor"]) for a in recorded] == [
        ("replay", alice),
        ("cancel", alice),
    ]
    at = datetime.fromisoformat(recorded[0]["at"].replace("Z", "+00:00"))
    assert before <= at <= datetime.now(UTC) + timedelta(seconds=5)
    (running,) = add(engine)
    claim_as(engine, "w:1:x", 1)
    code, out, _ = rota(capsys, "cancel", str(running), "--db", db_url)
    assert code == 0 and "requested" in out
    code, out, _ = rota(capsys, "job", str(running), "--db", db_url)
    assert f"cancel by {alice} at " in out and "(no reason given)" in out


def test_the_os_user_falls_back_to_the_account_name(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store_types(engine, REPORT)
    (job_id,) = add(engine)
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOGNAME", "\x1b[31mmallory\x1b[0m")  # unprintable: not believed
    assert rota(capsys, "cancel", str(job_id), "--db", db_url)[0] == 0
    with engine.connect() as conn:
        actor = conn.execute(select(operator_actions.c.actor)).scalar_one()
    assert actor == f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}"


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("a\x00b", "NUL"),
        ("x" * 1001, "at most 1000 characters"),
        ("clear\x1b[2Jscreen", "control character (U+001B"),
        ("two\nlines", "control character (U+000A"),
        ("bad \udcff byte", "not valid text"),
    ],
)
def test_a_reason_that_cannot_be_kept_safely_is_refused(
    engine: Engine,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    reason: str,
    message: str,
) -> None:
    applied(tmp_path, db_url, capsys)
    (job_id,) = add(engine)
    for argv in (
        ["cancel", str(job_id)],
        ["cancel", "--state", "QUEUED"],
        ["replay", str(job_id)],
        ["pause", "nightly-report"],
    ):
        code, _, err = rota(capsys, *argv, "--db", db_url, "--reason", reason)
        assert code == 2, argv
        assert "--reason" in err and message in err and "Traceback" not in err
    assert states(engine) == {job_id: "QUEUED"}
    with engine.connect() as conn:
        assert conn.execute(select(operator_actions)).first() is None


def test_undecodable_bytes_on_a_real_command_line_are_refused(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    applied(tmp_path, db_url, capsys)
    (job_id,) = add(engine)
    rota_exe = [sys.executable, "-m", "rota.cli.main"]
    for argv in (
        [b"cancel", str(job_id).encode(), b"--reason", b"caf\xe9"],
        [b"pause", b"nightly-rep\xffort"],
        [b"jobs", b"--schedule", b"\xfe"],
        [b"job", b"12345678\xff"],
    ):
        done = subprocess.run(
            [*(a.encode() for a in rota_exe), *argv],
            env=subprocess_env(db_url),
            cwd=REPO_ROOT,
            capture_output=True,
            timeout=60,
        )
        err = done.stderr.decode(errors="replace")
        assert done.returncode == 2, (argv, err)
        assert "Traceback" not in err
    assert job_row(engine, job_id)["state"] == "QUEUED"


# --- bulk forms -----------------------------------------------------------------------


def test_bulk_replay_and_cancel_print_counts_take_dry_run_and_keep_reasons(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str], alice: str
) -> None:
    store_types(engine, REPORT, CLEANUP)
    failed = add(engine, n=5, state="FAILED")
    old_failed = add(engine, n=2, state="FAILED", created_ago=timedelta(days=2))
    other = add(engine, CLEANUP, n=2, state="FAILED")
    add(engine, n=3)

    code, out, _ = rota(
        capsys,
        "replay",
        "--state",
        "FAILED",
        "--type",
        "report.generate",
        "--since",
        "1d",
        "--dry-run",
        "--db",
        db_url,
    )
    assert code == 0 and out.strip() == "would replay 5 job(s) (5 FAILED); dry run: nothing changed"
    assert set(states(engine, failed).values()) == {"FAILED"}

    code, out, _ = rota(
        capsys, "replay", "--state", "FAILED", "--type", "report.generate", "--since", "1d",
        "--reason", "INC-7 fixed", "--batch-size", "2", "--db", db_url,
    )  # fmt: skip
    assert code == 0 and out.strip() == "5 job(s) queued again (5 now QUEUED)"
    assert set(states(engine, failed).values()) == {"QUEUED"}
    assert set(states(engine, [*old_failed, *other]).values()) == {"FAILED"}
    assert job_row(engine, failed[0])["attempt_count"] == 0

    (running,) = (c.job_id for c in claim_as(engine, "w:1:x", 1))
    code, out, _ = rota(
        capsys,
        "cancel",
        "--type",
        "report.generate",
        "--state",
        "queued",
        "--dry-run",
        "--db",
        db_url,
    )
    assert code == 0 and out.strip() == "would cancel 7 job(s) (7 QUEUED); dry run: nothing changed"
    code, out, _ = rota(
        capsys,
        "cancel",
        "--type",
        "report.generate",
        "--state",
        "QUEUED",
        "--db",
        db_url,
        "--reason",
        "drain",
    )
    assert code == 0 and out.strip() == "7 job(s) cancelled (7 now CANCELLED)"
    assert job_row(engine, running)["state"] == "RUNNING"  # not QUEUED: not asked for
    code, out, _ = rota(capsys, "cancel", "--type", "report.generate", "--db", db_url)
    assert code == 0 and out.strip() == "1 job(s) cancelled (1 now CANCEL_REQUESTED)"
    assert job_row(engine, running)["lease_owner"] == "w:1:x"  # as for `rota cancel ID`

    code, out, _ = rota(capsys, "job", str(failed[0]), "--db", db_url)
    assert ": INC-7 fixed" in out and ": drain" in out
    with engine.connect() as conn:
        recorded = conn.execute(select(operator_actions.c.action, operator_actions.c.job_id)).all()
    assert sorted(a for a, _ in recorded) == ["cancel"] * 8 + ["replay"] * 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "--state", "QUEUED"], "jobs in state QUEUED cannot be replayed"),
        (["cancel", "--state", "SUCCEEDED,QUEUED"], "jobs in state SUCCEEDED cannot be cancelled"),
        (["cancel", "12345678", "--state", "QUEUED"], "not both"),
        (["cancel"], "give a job ID, or filters"),
        (["replay"], "give a job ID, or filters"),
        (["replay", "12345678", "--dry-run"], "--dry-run is for the bulk form"),
        (["cancel", "--state", "QUEUED", "--batch-size", "0"], "--batch-size: must be between"),
        (["cancel", "--schedule", "nope"], "unknown schedule 'nope'"),
        (["cancel", "--state", " , "], "--state: no state named"),
        (["cancel", "--type", ""], "unknown job type ''"),
    ],
)
def test_bulk_forms_refuse_what_they_cannot_do(
    engine: Engine,
    db_url: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    store_types(engine, REPORT)
    (job_id,) = add(engine)
    code, _, err = rota(capsys, *argv, "--db", db_url)
    assert code == 2 and message in err and "Traceback" not in err
    assert job_row(engine, job_id)["state"] == "QUEUED"


def test_a_bulk_operation_commits_bounded_batches(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store_types(engine, REPORT)
    add(engine, n=10, state="FAILED")
    code, out, err = rota(
        capsys, "replay", "--state", "FAILED", "--batch-size", "3", "--db", db_url
    )
    assert code == 0 and out.strip() == "10 job(s) queued again (10 now QUEUED)"
    assert "in 4 transactions of at most 3" in err

    add(engine, n=10, state="FAILED")
    commits: list[int] = []

    def committed(_conn: Any) -> None:
        commits.append(1)

    event.listen(engine, "commit", committed)
    try:
        result = bulk_replay(engine, JobFilter(states=("FAILED",)), batch=3)
    finally:
        event.remove(engine, "commit", committed)
    # 3 + 3 + 3 + 1: four batches, each committed on its own.
    assert (result.total, result.batches, len(commits)) == (10, 4, 4)


def test_a_bulk_operation_stopped_by_a_database_error_says_what_it_did_and_resumes(
    engine: Engine, db_url: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store_types(engine, REPORT)
    ids = sorted(add(engine, n=10, state="FAILED"))
    refused = ids[4]  # in the second batch of 3
    with engine.begin() as conn:  # a real database error in the middle of the run
        if backend == "sqlite":
            conn.exec_driver_sql(
                f"CREATE TRIGGER refuse_one BEFORE UPDATE ON jobs WHEN OLD.job_id = "
                f"'{refused.hex}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse_one BEFORE UPDATE ON jobs FOR EACH ROW "
                f"WHEN (OLD.job_id = '{refused}') EXECUTE FUNCTION refuse_one()"
            )
    argv = ["replay", "--state", "FAILED", "--batch-size", "3", "--db", db_url]
    code, _, err = rota(capsys, *argv)
    assert code == 1 and "Traceback" not in err
    assert "after 3 job(s) queued again in 1 committed transaction(s)" in err
    assert "refused by the test" in err and "run the same command again" in err
    assert [s for _, s in sorted(states(engine, ids).items())] == ["QUEUED"] * 3 + ["FAILED"] * 7
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "DROP TRIGGER refuse_one" + ("" if backend == "sqlite" else " ON jobs")
        )
    code, out, _ = rota(capsys, *argv)
    assert code == 0 and out.strip() == "7 job(s) queued again (7 now QUEUED)"
