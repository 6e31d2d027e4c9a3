"""The `notifications:` section: checked at its lines, shown by `check` and `apply`
without URL paths or secrets, stored and removed by `apply`; and the scheduler's
`schedule_set_aside` notice."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from rota.cli.main import main
from rota.core.config import ScheduleFile
from rota.core.notifications import DELIVERY_JOB_TYPE, NotificationEvent, NotificationTarget
from rota.core.queries.notification_targets import load_notification_targets
from rota.core.tables import jobs, notification_targets
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.loader import load_schedule_text
from rota.scheduler.service import SchedulerService
from tests.scheduler.test_set_aside import bypass_check
from tests.support.scheduler_helpers import JOB_TYPE, MIN, T0, spec

HEAD = """\
job_types:
  work:
    handler: app.jobs:work
schedules:
  nightly:
    job_type: work
    cron: "30 2 * * *"
"""

TARGET = """\
notifications:
  ops-hook:
    url: https://hooks.example.com/services/T0/B0/the-path-is-a-secret
    events: [job_failed, deadline_missed]
    secret_env: OPS_HOOK_SECRET
    schedules: [nightly]
    job_types: [work]
"""


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_and_apply_show_the_targets_without_their_paths(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + TARGET)
    code, out, err = rota(capsys, "check", str(path))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ok: 1 schedules, 1 job types, 1 notifications",
        "  notification ops-hook: https://hooks.example.com/...; events: job_failed, "
        "deadline_missed; schedules: nightly; job types: work; secret from $OPS_HOOK_SECRET; "
        "pool default",
    ]
    code, out, _ = rota(capsys, "apply", str(path), "--dry-run", "--db", db_url)
    assert code == 0
    assert "  notification ops-hook: added (https://hooks.example.com/...;" in out
    assert f"  job type {DELIVERY_JOB_TYPE}: added" in out
    assert "the-path-is-a-secret" not in out
    with engine.connect() as conn:
        assert load_notification_targets(conn) == []  # a dry run stores nothing

    assert rota(capsys, "apply", str(path), "--db", db_url)[0] == 0
    with engine.connect() as conn:
        (stored,) = load_notification_targets(conn)
    assert stored == load_schedule_text(HEAD + TARGET).notifications["ops-hook"]
    code, out, _ = rota(capsys, "apply", str(path), "--db", db_url)
    assert "notification" not in out  # unchanged

    path.write_text(HEAD + TARGET.replace("[job_failed, deadline_missed]", "[job_failed]"))
    assert "  notification ops-hook: changed" in rota(capsys, "apply", str(path), "--db", db_url)[1]
    path.write_text(HEAD)
    assert "  notification ops-hook: removed" in rota(capsys, "apply", str(path), "--db", db_url)[1]
    with engine.connect() as conn:
        assert conn.execute(select(notification_targets)).all() == []


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com?token=the-token-is-a-secret",
        "https://hooks.example.com/?token=the-token-is-a-secret",
        "https://hooks.example.com#the-token-is-a-secret",
        "https://hooks.example.com/hook/the-token-is-a-secret?x=1",
    ],
)
def test_check_and_apply_show_neither_a_urls_query_nor_the_secret(
    url: str,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the scheme and the host: a query or fragment carries a token as often as a
    path does; and the secret's value, even where the variable is set, is never read."""
    monkeypatch.setenv("OPS_HOOK_SECRET", "the-secret-value")
    path = tmp_path / "s.yaml"
    path.write_text(
        HEAD + TARGET.replace("https://hooks.example.com/services/T0/B0/the-path-is-a-secret", url)
    )
    for argv in (("check", str(path)), ("apply", str(path), "--dry-run", "--db", db_url)):
        code, out, err = rota(capsys, *argv)
        assert code == 0, err
        assert "notification ops-hook: " in out and "https://hooks.example.com/..." in out
        assert "the-token-is-a-secret" not in out + err, argv
        assert "the-secret-value" not in out + err and "$OPS_HOOK_SECRET" in out


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_schedule_text(HEAD + text, "n.yaml")
    return [str(p) for p in caught.value.problems]


def _target(**fields: str) -> str:
    return _target_lines(**fields)[0]


def _target_lines(**fields: str) -> tuple[str, list[str]]:
    """One target named ``hook`` (line 9 of the file); a field "<absent>" is left out.

    Returns the text and the keys written, in order (from line 10)."""
    given = {
        "url": "https://hooks.example.com/rota",
        "events": "[job_failed]",
        "secret_env": "HOOK_SECRET",
        **fields,
    }
    present = {k: v for k, v in given.items() if v != "<absent>"}
    lines = "".join(f"    {k}: {v}\n" for k, v in present.items())
    return f"notifications:\n  hook:\n{lines}", list(present)


LONG_URL = "https://hooks.example.com/" + "a" * 2_000


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"url": "http://hooks.example.com/rota"}, "plain http is allowed only to a loopback"),
        ({"url": "ftp://hooks.example.com/rota"}, "must start with https://"),
        ({"url": "https://user:pw@hooks.example.com/x"}, "must not carry a user name or password"),
        ({"url": '"https://hooks.example.com/a\\0b"'}, "must not contain spaces or control"),
        ({"url": "https://hooks.example.com:99999/x"}, "is not a valid URL"),
        ({"url": "https:///x"}, "has no host"),
        ({"url": LONG_URL}, "is longer than 2000 characters"),
        ({"url": "42"}, "expected a URL"),
        ({"url": "<absent>"}, "needs url"),
        ({"events": "[job_faild]"}, "unknown event 'job_faild'; did you mean 'job_failed'?"),
        ({"events": "[job_failed, job_failed]"}, "'job_failed' is listed twice"),
        ({"events": "job_failed"}, "expected a non-empty list of events"),
        ({"secret_env": "'my secret value'"}, "expected the name of an environment variable"),
        ({"secret_env": "<absent>"}, "needs secret_env"),
        ({"schedules": "[nightyl]"}, "unknown schedule 'nightyl'; did you mean 'nightly'?"),
        ({"job_types": "[wrok]"}, "unknown job type 'wrok'; did you mean 'work'?"),
        ({"pool": "'a b'"}, "use letters, digits"),
        ({"insecure": "maybe"}, "expected true or false"),
        ({"timeout": "2m"}, "must be at most 50s"),
        ({"timeout": "0s"}, "must be longer than 0s"),
        ({"secrets": "X"}, "unknown key 'secrets'; did you mean 'secret_env'?"),
    ],
)
def test_a_bad_target_is_refused_at_its_line(fields: dict[str, str], problem: str) -> None:
    text, keys = _target_lines(**fields)
    (found,) = _problems(text)
    assert found.startswith("n.yaml:") and problem in found
    key = next(iter(fields))
    line = 9 if fields[key] == "<absent>" else 10 + keys.index(key)
    assert found.split(":")[1] == str(line)
    assert "pw@" not in found and "a" * 100 not in found  # no credential, no long URL shown


def test_insecure_allows_plain_http_and_loopback_needs_no_flag() -> None:
    loaded = load_schedule_text(HEAD + _target(url="http://hooks.example.com/x", insecure="true"))
    assert loaded.notifications["hook"].insecure
    for url in ("http://127.0.0.1:8080/x", "http://localhost/x", "http://[::1]:9/x"):
        assert load_schedule_text(HEAD + _target(url=url)).notifications["hook"].url == url


def test_names_and_counts_are_bounded_and_rota_job_types_reserved() -> None:
    (slash,) = _problems(_target().replace("  hook:", "  a/b:"))
    assert "without '/'" in slash
    many = "notifications:\n" + "".join(
        f"  t{i}:\n    url: https://h.example.com/\n    events: [job_failed]\n    secret_env: S\n"
        for i in range(101)
    )
    (too_many,) = _problems(many)
    assert "at most 100 targets" in too_many
    with pytest.raises(ConfigError) as caught:
        load_schedule_text("job_types:\n  rota.notify:\n    handler: a:b\n", "n.yaml")
    (reserved,) = [str(p) for p in caught.value.problems]
    assert (
        reserved == "n.yaml:2: job type 'rota.notify': names starting with 'rota.' are rota's own"
    )


def test_a_schedule_set_aside_is_notified_once(engine: Engine) -> None:
    target = NotificationTarget(
        name="ops",
        url="https://hooks.example.com/rota",
        events=(NotificationEvent.SCHEDULE_SET_ASIDE,),
        secret_env="OPS",
    )
    sf = ScheduleFile(
        path="t.yaml",
        job_types={JOB_TYPE.name: JOB_TYPE},
        schedules={"bad": spec("bad"), "good": spec("good")},
        notifications={"ops": target},
    )
    apply_schedule_file(engine, sf, now=T0)
    bypass_check(engine, "bad", jitter="999999999d")
    service = SchedulerService(engine)
    service.run_once(T0 + MIN)
    service.run_once(T0 + 3 * MIN)  # the same reason again: no second notice
    (delivery,) = _deliveries(engine)
    body = delivery["args"]["body"]
    assert (body["event"], body["schedule"], body["job_id"]) == ("schedule_set_aside", "bad", None)
    assert "DurationTooLong" in body["reason"]


def _deliveries(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(jobs).where(jobs.c.job_type == DELIVERY_JOB_TYPE)).mappings()
        return [dict(r) for r in rows]


def test_a_late_occurrence_is_notified_once_with_its_reason(engine: Engine) -> None:
    """The deadline check enqueues one ``deadline_missed`` delivery per late record, in
    the transaction that records it; a second check (or replica) records and sends none."""
    target = NotificationTarget(
        name="ops",
        url="https://hooks.example.com/rota",
        events=(NotificationEvent.DEADLINE_MISSED,),
        secret_env="OPS",
        schedules=("late",),
    )
    sf = ScheduleFile(
        path="t.yaml",
        job_types={JOB_TYPE.name: JOB_TYPE},
        schedules={
            "late": spec("late", deadline=timedelta(seconds=30)),
            "other": spec("other", deadline=timedelta(seconds=30)),
        },
        notifications={"ops": target},
    )
    apply_schedule_file(engine, sf, now=T0)
    service = SchedulerService(engine)
    service.run_once(T0 + MIN)  # both jobs made, neither ever runs
    made = service.check_deadlines(T0 + 2 * MIN)
    assert sorted(r.schedule_name for r in made) == ["late", "other"]
    assert service.check_deadlines(T0 + 2 * MIN) == []
    (delivery,) = _deliveries(engine)  # "other" is filtered out by the target
    body = delivery["args"]["body"]
    (record,) = [r for r in made if r.schedule_name == "late"]
    assert (body["event"], body["schedule"], body["reason"], body["job_type"]) == (
        "deadline_missed",
        "late",
        "not_finished",
        JOB_TYPE.name,
    )
    assert body["instant"].startswith((T0 + MIN).strftime("%Y-%m-%dT%H:%M:%S"))
    assert body["job_id"] == str(record.job_id)
