"""Property-based tests: generated schedule files and command lines (issue 7, item 14).

Whatever is generated, every command ends with exit 0 or 2 (never an
exception escaping ``rota.cli.main``, which would print a traceback), within a
generous per-example deadline (Hypothesis fails an example that exceeds it: a
hang or an unbounded walk shows up as a failure, not as a timing assertion on
the product), and an ``apply`` that exits 2 has changed nothing.

The strategies mix valid and hostile parts: real rule texts next to RRULEs
assembled from random parts and out-of-range numbers, durations in other
scripts and with huge magnitudes, escaped NULs and lone surrogates, YAML
tags, anchors, aliases and deep nesting. Kept to a few hundred examples in
all, so CI stays quick; ``ROTA_HYPOTHESIS_SCALE=20`` runs twenty times as many,
freshly random, to hunt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from rota.cli.main import main
from rota.core.database import make_engine
from rota.core.tables import job_types, schedules
from rota.migrations.runner import upgrade

SCALE = int(os.environ.get("ROTA_HYPOTHESIS_SCALE", "1"))
COMMON: dict[str, Any] = dict(
    deadline=20_000,  # ms per example: generous on a loaded 2-core machine; a hang fails it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=SCALE == 1,  # CI: the same examples on every run, so failures reproduce
    database=None,
)

# --- schedule files -------------------------------------------------------------

RULES = [
    'cron: "*/15 * * * *"',
    'cron: "30 2 * * *"',
    'cron: "0 0 29 2 *"',
    'cron: "0 0 31 4 *"',
    'cron: "* * * * * *"',
    'cron: "@hourly"',
    'rrule: "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=2"',
    "every: 90s",
    "every: 1s",
]
FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY", "NONE"]
PARTS = [
    "BYSECOND", "BYMINUTE", "BYHOUR", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH",
    "BYSETPOS", "INTERVAL", "COUNT", "BYDAY", "WKST", "UNTIL", "BYEASTER",
]  # fmt: skip
NUMBERS = st.one_of(st.integers(-400, 400), st.sampled_from([0, 60, 367, 10**9, -(10**12), 2**63]))


@st.composite
def rrules(draw: st.DrawFn) -> str:
    parts = [f"FREQ={draw(st.sampled_from(FREQS))}"]
    for name in draw(st.lists(st.sampled_from(PARTS), max_size=4)):
        if name == "BYDAY":
            value = draw(st.sampled_from(["MO", "2TU", "-1FR", "53SU", "XX", "MO,FR"]))
        elif name == "WKST":
            value = draw(st.sampled_from(["MO", "SU", "ZZ"]))
        elif name == "UNTIL":
            value = draw(st.sampled_from(["20300101", "19700101T000000", "2030", "20300101Z"]))
        else:
            value = ",".join(str(n) for n in draw(st.lists(NUMBERS, min_size=1, max_size=3)))
        parts.append(f"{name}={value}")
    body = ";".join(parts)
    if draw(st.booleans()):
        start = draw(st.sampled_from(["19700101T000000", "20260101T090000", "99991231T000000"]))
        return json.dumps(f"DTSTART:{start}\nRRULE:{body}")
    return json.dumps(body)


DURATIONS = st.one_of(
    st.sampled_from(
        [
            "0s",
            "500ms",
            "90s",
            "5m",
            "1h30m",
            "1d",
            "7d",
            "366d",
            "999999999d",
            "1e300",
            "\u0663s",
            "1.5",
            "-1s",
            "36525d",
            "99999999999999999999999d",
            '""',
            "[1, 2]",
        ]
    ),
    st.builds(lambda n, u: f"{n}{u}", st.integers(0, 10**15), st.sampled_from(["ms", "s", "d"])),
)
TEXTS = st.one_of(
    st.text(max_size=40).map(json.dumps),  # JSON escapes: NULs, lone surrogates, controls
    st.sampled_from(['"a\\0b"', '"\\ud800"', '"x" ', "null", "~", "[]", "{}", "'quoted'"]),
)
STRUCTURES = st.sampled_from(
    [
        "!!set {a, b}",
        "!!omap [{a: 1}]",
        "!!python/object:os.system {}",
        "!custom 1",
        "&loop {k: *loop}",
        "*undefined",
        "[" * 200 + "]" * 200,
        "{a: " * 150 + "1" + "}" * 150,
        "!!binary aGVsbG8=",
        "2026-13-01",
        "9" * 5001,
    ]
)
FIELDS: dict[str, st.SearchStrategy[str]] = {
    "timezone": st.sampled_from(["UTC", "Europe/Berlin", "Mars/Base", '"a\\0b"', "../etc"]),
    "misfire": st.sampled_from(["catch_up", "skip", "coalesce", "nope"]),
    "grace": DURATIONS,
    "catch_up_window": DURATIONS,
    "jitter": DURATIONS,
    "overlap": st.sampled_from(["allow", "forbid", "replace", "maybe"]),
    "payload_ref": TEXTS,
    "args": st.one_of(
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3).map(
            json.dumps
        ),
        st.sampled_from(['{"a": NaN}', "{a: .inf}", "[1, 2]", "{1: 2}"]),
    ),
    "exclude_dates": st.sampled_from(["[2026-12-31]", "[2026-02-30]", "[yesterday]", "5"]),
    "anchor": st.sampled_from(["2026-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31"]),
    "dst": st.sampled_from(["{nonexistent: skip}", "{ambiguous: both}", "{nonexistent: x}"]),
    "unknown_key": TEXTS,
}
JOB_TYPE_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "max_attempts": NUMBERS.map(str),
    "priority": NUMBERS.map(str),
    "lease": DURATIONS,
    "timeout": DURATIONS,
    "backoff": st.sampled_from(["{base: 5s, max: 15m}", "{base: 1d, max: 1s}", "{max: 999d}"]),
    "pool": TEXTS,
    "command": st.sampled_from(['["/bin/true"]', '["/bin/echo", "a\\0b"]', "[]", '[""]']),
}


@st.composite
def schedule_files(draw: st.DrawFn) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append(f"x-anchor: &common {draw(STRUCTURES)}")
    lines += ["job_types:", "  work:", "    handler: app.jobs:work"]
    for key in draw(st.lists(st.sampled_from(sorted(JOB_TYPE_FIELDS)), max_size=2, unique=True)):
        lines.append(f"    {key}: {draw(JOB_TYPE_FIELDS[key])}")
    lines.append("schedules:")
    for i in range(draw(st.integers(1, 3))):
        lines += [f"  s{i}:", "    job_type: work"]
        rule = draw(st.one_of(st.sampled_from(RULES), rrules().map(lambda r: f"rrule: {r}")))
        lines.append(f"    {rule}")
        for key in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=3, unique=True)):
            value = draw(st.one_of(FIELDS[key], STRUCTURES)) if key == "args" else draw(FIELDS[key])
            lines.append(f"    {key}: {value}")
        if draw(st.integers(0, 9)) == 0:
            lines.append("    <<: *common")
    return "\n".join(lines) + "\n"


def run(*argv: str) -> int:
    """The entry point as `rota` runs it; an exception escaping it fails the example."""
    try:
        return main(list(argv))
    except SystemExit as exc:  # argparse: usage errors are exit 2
        return int(exc.code or 0)


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'rota.db'}"
    engine = make_engine(url)
    upgrade(engine)
    yield url, engine
    engine.dispose()


def snapshot(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(schedules.c.name, schedules.c.definition_hash, schedules.c.removed)
        ).all()
        types = conn.execute(select(job_types.c.name, job_types.c.definition)).all()
    return sorted(map(tuple, rows)) + sorted((n, json.dumps(d, sort_keys=True)) for n, d in types)


@settings(max_examples=120 * SCALE, **COMMON)
@given(text=schedule_files())
def test_check_and_preview_of_generated_files_exit_0_or_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text)
    code = run("check", str(path))
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:
        assert err.strip(), "exit 2 without a message"
        assert all(line.startswith(f"{path}:") for line in err.splitlines()), err
    else:
        for name in ("s0", "s1"):
            assert run("preview", str(path), name, "--from", "2026-06-01T00:00:00Z") in (0, 2)
        capsys.readouterr()


@settings(max_examples=40 * SCALE, **COMMON)
@given(text=schedule_files())
def test_apply_of_generated_files_changes_nothing_when_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sqlite_engine: tuple[str, Engine],
    text: str,
) -> None:
    url, engine = sqlite_engine
    path = tmp_path / "f.yaml"
    path.write_text(text)
    before = snapshot(engine)
    code = run("apply", str(path), "--db", url)
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:
        assert "nothing was applied" in err
        assert snapshot(engine) == before


# --- command lines ----------------------------------------------------------------

HOSTILE_WORDS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "-1",
            "0",
            "9223372036854775808",
            str(10**20),
            "1e300",
            "nan",
            "inf",
            "\u0663",
            "9999-12-31T23:59:59Z",
            "0001-01-01T00:00:00Z",
            "2026-02-30",
            "yesterday",
            '{"a": NaN}',
            '{"a": ' + "[" * 2000 + "]" * 2000 + "}",
            '{"a": ' + "9" * 5001 + "}",
            "[1, 2]",
            '{"k": "\\u0000"}',
            "a\x00b",
        ]
    ),
)
FLAGS = {
    "enqueue": ["--args", "--payload-ref", "--dedup-key", "--run-after", "--priority",
                "--max-attempts", "--tenant", "--concurrency-key"],
    "jobs": ["--limit", "--state", "--schedule"],
    "backfill": ["--from", "--to", "--max"],
    "preview": ["--from", "--count"],
    "apply": ["--simulate", "--from"],
}  # fmt: skip


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(FLAGS)))
    argv = [command]
    if command == "enqueue":
        argv.append(draw(st.sampled_from(["work", "nope", "w" * 300])))
    elif command == "backfill":
        argv += ["s", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"]
    elif command == "preview":
        argv += ["{file}", draw(st.sampled_from(["s", "nope"]))]
    elif command == "apply":
        argv += ["{file}", "--dry-run"]
    for flag in draw(st.lists(st.sampled_from(FLAGS[command]), max_size=3, unique=True)):
        argv += [flag, draw(HOSTILE_WORDS)]
    return [a.replace("\x00", "") for a in argv]  # a process's argv cannot hold NUL


@settings(max_examples=60 * SCALE, **COMMON)
@given(argv=command_lines())
def test_generated_command_lines_exit_0_or_2(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = tmp_path / "f.yaml"
    if not path.exists():
        path.write_text(
            "job_types:\n  work:\n    handler: app.jobs:work\n"
            "schedules:\n  s:\n    job_type: work\n    every: 1m\n"
        )
        assert run("apply", str(path), "--db", db_url) == 0
    argv = [str(path) if a == "{file}" else a for a in argv]
    code = run(*argv, "--db", db_url)
    _out, err = capsys.readouterr()
    assert code in (0, 2), (argv, err)
    if code == 2:
        assert err.strip(), "exit 2 without a message"
