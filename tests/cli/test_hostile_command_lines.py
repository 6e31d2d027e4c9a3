"""Hostile command lines: a mistake is exit 2 with a message, never 1 with a database error.

Run through the real entry point on both backends (PostgreSQL refuses
out-of-range integers that SQLite stores, so a missing check shows there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from rota.cli.main import main
from rota.core.tables import jobs

FILE = """\
job_types:
  work:
    handler: app.jobs:work
schedules: {}
"""


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def applied(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "f.yaml"
    path.write_text(FILE)
    assert rota(capsys, "apply", str(path), "--db", db_url)[0] == 0
    return db_url


def job_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(jobs)).scalar_one())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--args", '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"], "--args: nested too deeply"),
        (["--args", '{"a": ' + "9" * 5001 + "}"], "--args: Exceeds the limit (4300 digits)"),
        (["--args", '{"a": NaN}'], "--args: NaN is not a JSON number"),
        (["--args", '{"a": Infinity}'], "--args: Infinity is not a JSON number"),
        (["--args", "[1, 2]"], "--args: must be a JSON object"),
        (["--priority", str(10**20)], "--priority: must be between -1,000,000 and 1,000,000"),
        (["--max-attempts", str(2**31)], "--max-attempts: must be between 1 and 1,000"),
        (["--payload-ref", "a\0b"], "payload_ref holds a NUL character"),
        (["--dedup-key", "k" * 401], "dedup_key is at most 400 characters"),
    ],
)
def test_enqueue_refuses_bad_values(
    applied: str,
    engine: Engine,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    code, _, err = rota(capsys, "enqueue", "work", *argv, "--db", applied)
    assert (code, "Traceback" in err) == (2, False), err
    assert message in err
    assert job_count(engine) == 0


@pytest.mark.parametrize("limit", ["9223372036854775808", "0", "-1"])
def test_jobs_limit_out_of_range(
    applied: str, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    code, _, err = rota(capsys, "jobs", "--limit", limit, "--db", applied)
    assert code == 2
    assert "--limit: must be between 1 and 10,000,000" in err


@pytest.mark.parametrize("command", [["jobs"], ["late"], ["audit"], ["cancel"], ["replay"]])
@pytest.mark.parametrize("since", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_since_out_of_range_names_the_option(
    applied: str, capsys: pytest.CaptureFixture[str], command: list[str], since: str
) -> None:
    code, _, err = rota(capsys, *command, "--since", since, "--db", applied)
    assert (code, "Traceback" in err) == (2, False), err
    assert "--since" in err and "years 1 to 9999 in UTC" in err, err
