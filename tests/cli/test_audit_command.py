"""``rota audit [--since D] [--actor NAME] [--limit N] [--json]``: the record, newest first.

Filters as ``GET /audit`` takes them; a value no row could match is exit 2
with a message, never a traceback. Both backends.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.core.operator_notes import ActionNote
from rota.operations.schedules import pause, resume, trigger
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text

SCHEDULES = """
job_types:
  t:
    handler: tests.handlers.plain:noop
schedules:
  nightly:
    job_type: t
    cron: "0 2 * * *"
"""


@pytest.fixture
def history(engine: Engine) -> None:
    """carol paused and resumed three days ago; alice triggered twice now, then bob paused."""
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    long_ago = datetime.now(UTC) - timedelta(days=3)
    pause(engine, "nightly", now=long_ago, note=ActionNote.of("carol", "old"))
    resume(engine, "nightly", now=long_ago + timedelta(seconds=1), note=ActionNote.of("carol"))
    trigger(engine, "nightly", note=ActionNote.of("alice", "one"))
    trigger(engine, "nightly", note=ActionNote.of("alice", "two"))
    pause(engine, "nightly", note=ActionNote.of("bob", "enough"))


def audit(capsys: pytest.CaptureFixture[str], db_url: str, *argv: str) -> list[dict[str, Any]]:
    code = main(["audit", "--json", "--db", db_url, *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    entries: list[dict[str, Any]] = json.loads(out)
    return entries


def who(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["actor"], e["action"]) for e in entries]


def test_filters_and_limit(db_url: str, history: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert who(audit(capsys, db_url)) == [
        ("bob", "pause"),
        ("alice", "trigger"),
        ("alice", "trigger"),
        ("carol", "resume"),
        ("carol", "pause"),
    ]
    assert [e["reason"] for e in audit(capsys, db_url, "--actor", "alice")] == ["two", "one"]
    assert who(audit(capsys, db_url, "--since", "1d")) == who(audit(capsys, db_url))[:3]
    two_days_ago = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    assert who(audit(capsys, db_url, "--since", two_days_ago, "--actor", "carol")) == []
    assert who(audit(capsys, db_url, "--limit", "2")) == [("bob", "pause"), ("alice", "trigger")]
    assert audit(capsys, db_url, "--actor", "nobody") == []

    assert main(["audit", "--db", db_url, "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2 and "bob" in out and "enough" in out
    assert "--limit" in err  # says that more rows exist
    assert main(["audit", "--db", db_url, "--actor", "nobody"]) == 0
    assert "no operator actions" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--actor", "a\x00b"], "NUL"),
        (["--actor", "x" * 201], "at most 200 characters"),
        (["--since", "9999-12-31T23:59:59-05:00"], "out of the range"),
        (["--since", "0001-01-01T00:00:00+01:00"], "out of the range"),
        (["--since", "99999999999d"], "--since"),
        (["--since", "yesterday"], "neither a duration"),
        (["--limit", "0"], "--limit"),
    ],
)
def test_hostile_values_are_exit_2_with_a_message(
    db_url: str, history: None, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code = main(["audit", "--db", db_url, *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
