"""Hostile schedule files: each is refused with `file:line: message` and exit 2, in bounded time.

Found by a generated campaign against `rota check` and `rota apply` (alias
bombs that hung, nesting and tags that printed tracebacks, /dev/zero read to
3 GB, a FIFO waited on forever, numbers without a range). The cases run
through the real entry point, as `rota check FILE`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rota.cli.main import main

HEAD = """\
job_types:
  work:
    handler: app.jobs:work
schedules:
  s:
    job_type: work
"""


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str]:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    code, _, err = rota(capsys, "check", str(path))
    assert "Traceback" not in err
    return code, err.replace(str(path), "f.yaml")


# --- what is read -----------------------------------------------------------


def test_a_device_is_refused_unread(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = rota(capsys, "check", "/dev/zero")
    assert code == 2
    assert err == "/dev/zero:1: cannot read the file: it is a character device, not a file\n"


def test_a_fifo_is_refused_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # nobody writes to it: opening it for reading would block
    code, _, err = rota(capsys, "check", str(fifo))
    assert code == 2
    assert "it is a FIFO (named pipe), not a file" in err


def test_a_file_over_10_mb_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(10 * 1024 * 1024 + 1)  # sparse: nothing is written
    code, _, err = rota(capsys, "check", str(big))
    assert code == 2
    assert "the file is 10,485,761 bytes; a schedule file is at most 10,485,760 bytes" in err


def test_config_dev_zero_is_refused_by_any_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'rota.db'}"
    assert rota(capsys, "migrate", "--db", db)[0] == 0
    code, _, err = rota(capsys, "enqueue", "work", "--db", db, "--config", "/dev/zero")
    assert code == 2
    assert "/dev/zero:1: cannot read the file: it is a character device" in err
    assert "nothing was applied" in err


# --- YAML ---------------------------------------------------------------------


def test_an_alias_bomb_is_refused_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each anchor is ten aliases of the one before: *i stands for 10^9 values.
    lines = ["x-a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"x-{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    text = "\n".join(lines) + "\n" + HEAD + "    every: 1m\n    args: {k: *i}\n"
    code, err = check_text(tmp_path, capsys, text)
    assert code == 2
    assert err.startswith("f.yaml:5: YAML aliases expand the file by more than 100,000 values")


def test_a_recursive_alias_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = check_text(tmp_path, capsys, HEAD + "    every: 1m\n    args: &a {k: *a}\n")
    assert code == 2
    assert err.startswith("f.yaml:8: the alias *a is inside its own anchor")


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "{a: " * 3000 + "1" + "}" * 3000])
def test_deep_nesting_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, err = check_text(tmp_path, capsys, HEAD + f"    every: 1m\n    args: {{k: {value}}}\n")
    assert code == 2
    assert err.startswith("f.yaml:8: ")
    assert "nest" in err  # ours: "nested more than 100 levels"; libyaml: "maximum nesting depth"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("!!set {a, b}", "'!!set'"),
        ("!!omap [{a: 1}]", "'!!omap'"),
        ("!!python/object:os.system {}", "'!!python/object:os.system'"),
        ("!custom {a: 1}", "'!custom'"),
    ],
)
def test_tags_other_than_the_core_ones_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, shown: str
) -> None:
    code, err = check_text(tmp_path, capsys, HEAD + f"    every: 1m\n    args: {value}\n")
    assert code == 2
    assert f"f.yaml:8: the YAML tag {shown} is not supported here" in err


def test_a_nul_is_reported_at_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = check_text(tmp_path, capsys, HEAD + '    every: 1m\n    payload_ref: "a\0b"\n')
    assert code == 2
    assert err.startswith("f.yaml:8: bad YAML: a NUL character is not allowed")


def test_a_scalar_merge_is_reported_at_the_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "x-anchor: &scalar hello\n" + HEAD + "    every: 1m\n    <<: *scalar\n"
    code, err = check_text(tmp_path, capsys, text)
    assert code == 2
    assert err.startswith("f.yaml:9: schedule 's': << must merge a mapping")


# --- values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("every: 1.0e300", "every: bad duration '1.0e300'"),
        ("every: 1e300s", "every: bad duration '1e300s'"),
        ("every: 99999999999999999999999d", "every: must be at most 36525d"),
        ("every: \u0663s", "every: bad duration"),  # ARABIC-INDIC DIGIT THREE
        ("every: 1m\n    grace: 999999999d", "grace: must be at most 366d"),
        ("every: 1m\n    catch_up_window: 999999999d", "catch_up_window: must be at most 366d"),
        ("every: 1m\n    jitter: 999999999d", "jitter: must be at most 7d"),
        ("every: 1m\n    jitter: 8d", "jitter: must be at most 7d"),
        ('every: 1m\n    payload_ref: "a\\0b"', "payload_ref: holds a NUL character"),
        ("every: 1m\n    args: {k: " + "x" * 1_000_001 + "}", "is larger than 1,000,000 bytes"),
        ('rrule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"', "never fires within 100 years"),
        ('cron: "0 0 30 2 *"', "it never matches any date"),
        ('rrule: "FREQ=MINUTELY;BYSECOND=60"', "BYSECOND=60 is out of range"),
        (
            'rrule: "DTSTART:19700101T000000\\nRRULE:FREQ=SECONDLY;COUNT=999999999999"',
            "COUNT must be between 1 and 10,000",
        ),
        (
            'rrule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30"',
            "takes more than 200,000 steps",
        ),
    ],
)
def test_schedule_values_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, expected: str
) -> None:
    code, err = check_text(tmp_path, capsys, HEAD + f"    {field}\n")
    assert code == 2
    first = err.splitlines()[0]
    assert first.startswith(("f.yaml:7: schedule 's', ", "f.yaml:8: schedule 's', ")), err
    assert expected in first


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("max_attempts: 2147483648", "max_attempts: must be between 1 and 1,000, got 2147483648"),
        ("max_attempts: 2^31", "max_attempts: expected a whole number"),
        ("priority: 100000000000000000000", "priority: must be between -1,000,000 and 1,000,000"),
        ("lease: 2d", "lease: must be at most 1d"),
        ("timeout: 31d", "timeout: must be at most 30d"),
        ("backoff: {base: 5s, max: 999d}", "backoff.max: must be at most 30d"),
    ],
)
def test_job_type_values_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, expected: str
) -> None:
    text = f"job_types:\n  work:\n    handler: app.jobs:work\n    {field}\nschedules: {{}}\n"
    code, err = check_text(tmp_path, capsys, text)
    assert code == 2
    assert err.startswith("f.yaml:4: job type 'work', "), err
    assert expected in err


def test_a_lone_surrogate_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """libyaml refuses the escape itself; PyYAML's parser builds it and the field refuses it."""
    code, err = check_text(tmp_path, capsys, HEAD + '    every: 1m\n    payload_ref: "\\ud800"\n')
    assert code == 2
    assert err.startswith("f.yaml:8: ")
    assert "Unicode" in err


def test_a_nul_in_a_command_argument_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = 'job_types:\n  work:\n    command: ["/bin/echo", "a\\0b"]\nschedules: {}\n'
    code, err = check_text(tmp_path, capsys, text)
    assert code == 2
    assert err.startswith("f.yaml:3: job type 'work', command: item 2 holds a NUL character")
