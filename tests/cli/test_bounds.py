"""Every numeric flag of every command is finite and within its documented range.

``inf``, ``nan``, negative and absurdly large values exit 2 with a message that
names the flag, before anything runs: every case through the command's parser,
and one for each long-running command through the real ``rota`` process, with
a hang guard (before these checks an executor ran with ``--poll-interval inf``).
The in-range edges are accepted by the same type functions.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rota.cli import bounds
from rota.cli.main import build_parser
from tests.support.executor_support import REPO_ROOT

HUGE = "9223372036854775808"  # 2^63: past every database integer
GUARD_SECONDS = 60.0

# (command words, flag, bad values)
CASES: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = [
    (("executor",), "--concurrency", ("0", "-1", "1000000", HUGE, "1e3", "٣")),
    (("run",), "--concurrency", ("0", "1000000")),
    (("executor",), "--prefetch", ("-1", "10000000000")),
    (("executor",), "--tenant-limit", ("0", HUGE)),
    (("executor",), "--drain-timeout", ("nan", "inf", "-1", "1e12")),
    (("run",), "--drain-timeout", ("nan", "-inf")),
    (("executor",), "--poll-interval", ("inf", "nan", "0", "-1", "1e12")),
    (("executor",), "--sweep-interval", ("nan", "inf", "0", "-5")),
    (("executor",), "--liveness-interval", ("nan", "0")),
    (("scheduler",), "--liveness-interval", ("inf",)),
    (("executor",), "--health-port", ("70000", "-1")),
    (("scheduler",), "--health-port", ("65536",)),
    (("run",), "--health-port", ("99999",)),
    (("scheduler",), "--batch", ("0", HUGE)),
    (("scheduler",), "--max-jobs", ("0", HUGE)),
    (("scheduler",), "--max-sleep", ("nan", "inf", "0", "-1")),
    (("run",), "--serve-port", ("70000", "-1")),
    (("serve",), "--port", ("70000", "-1")),
    (("jobs",), "--limit", (HUGE, "0", "-1")),
    (("preview", "f.yaml", "s"), "--count", ("0", "100000000000000000000")),
    (
        ("backfill", "s", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"),
        "--max",
        ("0", HUGE),
    ),
    (("cancel", "--type", "t"), "--batch-size", ("0", HUGE)),
    (("replay", "--type", "t"), "--batch-size", ("-1", HUGE)),
    (("enqueue", "t"), "--priority", ("100000000000000000000", "-1000001")),
    (("enqueue", "t"), "--max-attempts", ("0", "2147483648")),
]


def _flag_cases() -> list[object]:
    return [
        pytest.param(words, flag, value, id=f"{words[0]}{flag}={value}")
        for words, flag, values in CASES
        for value in values
    ]


@pytest.mark.parametrize(("words", "flag", "value"), _flag_cases())
def test_out_of_range_flag_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], words: tuple[str, ...], flag: str, value: str
) -> None:
    """Each case through the command's own parser, in this process: the refusal is
    argparse's exit 2 before any command runs."""
    argv = [*words, f"{flag}={value}", "--db", "sqlite:///none.db"]
    with pytest.raises(SystemExit) as exited:
        build_parser(words[0]).parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err


# One bad value for each long-running command, through the real ``rota`` process.
REAL = [
    (("executor",), "--poll-interval", "inf"),
    (("scheduler",), "--max-sleep", "nan"),
    (("run",), "--drain-timeout", "-inf"),
    (("serve",), "--port", "70000"),
]


@pytest.mark.parametrize(("words", "flag", "value"), REAL, ids=[w[0][0] for w in REAL])
def test_a_real_command_exits_2_before_anything_ran(
    tmp_path: Path, words: tuple[str, ...], flag: str, value: str
) -> None:
    db = f"sqlite:///{tmp_path / 'none.db'}"
    argv = [*words, f"{flag}={value}", "--db", db]
    proc = subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *argv],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
    )
    assert proc.returncode == 2, proc.stderr
    assert flag in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "none.db").exists()  # refused before anything ran


@pytest.mark.parametrize(
    ("convert", "edges"),
    [
        (bounds.CONCURRENCY, ("1", "1000")),
        (bounds.PREFETCH, ("0", "10000")),
        (bounds.DRAIN_TIMEOUT, ("0", "86400", "2.5")),
        (bounds.POLL_INTERVAL, ("0.01", "3600", "1e-2")),
        (bounds.SWEEP_INTERVAL, ("0.01", "3600")),
        (bounds.PORT, ("0", "65535")),
        (bounds.PRIORITY, ("-1000000", "1000000", "+5")),
    ],
)
def test_edges_of_each_range_are_accepted(convert: object, edges: tuple[str, ...]) -> None:
    assert callable(convert)
    for text in edges:
        convert(text)
