"""`rota migrate`, `rota enqueue`, `rota jobs`, `rota job` through the real entry point."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from rota.cli.main import main
from rota.core.config import JobTypeSpec
from rota.core.queries.job_types import upsert_job_types
from rota.core.tables import jobs


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_migrate_is_idempotent_and_other_commands_refuse_an_unmigrated_db(
    empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = rota(capsys, "jobs", "--db", empty_db_url)
    assert code == 1
    assert "rota migrate" in err
    assert rota(capsys, "migrate", "--db", empty_db_url)[0] == 0
    code, out, _ = rota(capsys, "migrate", "--db", empty_db_url)
    assert code == 0 and "already" in out
    assert rota(capsys, "jobs", "--db", empty_db_url)[0] == 0


def test_enqueue_then_list_and_show(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f")])
    code, out, _ = rota(
        capsys,
        "enqueue",
        "report",
        "--db",
        db_url,
        "--args",
        '{"region": "eu"}',
        "--payload-ref",
        "s3://b/k",
        "--dedup-key",
        "k1",
    )
    assert code == 0
    job_id = uuid.UUID(out.strip())
    code, out, _ = rota(capsys, "enqueue", "report", "--db", db_url, "--dedup-key", "k1")
    assert uuid.UUID(out.strip()) == job_id

    code, out, _ = rota(capsys, "jobs", "--db", db_url, "--json")
    listed = json.loads(out)
    assert [j["job_id"] for j in listed] == [str(job_id)]
    assert listed[0]["args"] == {"region": "eu"}
    assert "waiting for an executor" in listed[0]["status"]

    with engine.begin() as conn:
        conn.execute(
            update(jobs).values(
                state="FAILED",
                attempt_count=5,
                last_error_code="PAYMENT_DECLINED",
                last_error_detail="card expired",
            )
        )
    code, out, _ = rota(capsys, "job", str(job_id), "--db", db_url)
    assert code == 0
    assert "failed: PAYMENT_DECLINED, card expired (attempt 5 of 5)" in out
    code, out, _ = rota(capsys, "jobs", "--db", db_url, "--state", "failed")
    assert str(job_id) in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enqueue", "nope"], "unknown job type 'nope'"),
        (["enqueue", "report", "--args", "[1]"], "must be a JSON object"),
        (["enqueue", "report", "--args", "{bad"], "--args: not JSON"),
        (["enqueue", "report", "--run-after", "tomorrow"], "--run-after: bad instant"),
        (["job", "not-a-uuid"], "is not a job id"),
        (["job", "00000000-0000-0000-0000-000000000000"], "no job"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    engine: Engine,
    db_url: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f")])
    code, _, err = rota(capsys, *argv, "--db", db_url)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_enqueue_with_config_applies_the_file_first(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "s.yaml"
    config.write_text(
        "job_types:\n  adhoc:\n    handler: m:f\n    max_attempts: 2\nschedules: {}\n"
    )
    code, out, _ = rota(capsys, "enqueue", "adhoc", "--db", db_url, "--config", str(config))
    assert code == 0
    code, out, _ = rota(capsys, "job", out.strip(), "--db", db_url, "--json")
    assert json.loads(out)["max_attempts"] == 2
    config.write_text("job_types:\n  adhoc:\n    handler: m:f\n    retries: 2\n")
    code, _, err = rota(capsys, "enqueue", "adhoc", "--db", db_url, "--config", str(config))
    assert code == 2
    assert f"{config}:4: " in err and "nothing was applied" in err


@pytest.mark.parametrize(
    "argv",
    [["schedules"], ["pause", "x"], ["trigger", "x"], ["executor"], ["scheduler"]],
)
def test_a_bad_config_file_stops_every_command_that_takes_one(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("job_types:\n  a:\n    handler: m:f\n    retries: 3\nschedules: {}\n")
    code, _, err = rota(capsys, *argv, "--db", db_url, "--config", str(config))
    assert code == 2
    assert f"{config}:4: job type 'a': unknown key 'retries'" in err
    assert "nothing was applied" in err and "Traceback" not in err


def test_user_mistakes_give_messages_not_tracebacks(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f")])
    code, _, err = rota(capsys, "jobs", "--db", db_url, "--limit", "-1")
    assert (code, "--limit: must be between 1 and 10,000,000" in err) == (2, True)
    code, _, err = rota(capsys, "enqueue", "report", "--db", db_url, "--dedup-key", "k" * 401)
    assert (code, "dedup_key is at most 400 characters" in err) == (2, True)
    code, _, err = rota(
        capsys, "enqueue", "report", "--db", db_url, "--run-after", "0001-01-01T00:00:00+01:00"
    )
    assert code == 2 and "out of the range" in err and "Traceback" not in err
    missing = tmp_path / "nowhere.db"
    code, _, err = rota(capsys, "jobs", "--db", f"sqlite:///{missing}")
    assert code == 1 and "run `rota migrate` first" in err
    assert not missing.exists()
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("these are not the tables you are looking for\n" * 100)
    code, _, err = rota(capsys, "jobs", "--db", f"sqlite:///{not_a_db}")
    assert code == 1 and "Traceback" not in err and err.startswith("rota: ")


def test_jobs_json_lists_every_job_and_the_table_says_when_it_is_cut(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f")])
    for _ in range(3):
        assert rota(capsys, "enqueue", "report", "--db", db_url)[0] == 0
    code, out, _ = rota(capsys, "jobs", "--db", db_url, "--json")
    assert code == 0 and len(json.loads(out)) == 3
    code, out, err = rota(capsys, "jobs", "--db", db_url, "--limit", "2")
    assert code == 0 and len(out.strip().splitlines()) == 3  # header + 2 rows
    assert "the newest 2 shown" in err


def test_check_takes_db_like_every_command_and_refuses_names_too_long_to_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "job_types:\n  a:\n    handler: m:f\nschedules:\n  s: {job_type: a, every: 1m}\n"
    )
    assert rota(capsys, "check", str(good), "--db", "sqlite:///unused.db")[0] == 0
    long_name = tmp_path / "long.yaml"
    long_name.write_text(
        "job_types:\n  a:\n    handler: m:f\n    pool: " + "p" * 101 + "\n"
        "schedules:\n  " + "s" * 201 + ": {job_type: a, every: 1m}\n"
    )
    code, _, err = rota(capsys, "check", str(long_name))
    assert code == 2
    assert f"{long_name}:4: " in err and "at most 100 characters" in err
    assert f"{long_name}:6: " in err and "at most 200 characters" in err
