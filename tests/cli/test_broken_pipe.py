"""``rota LISTING | head -1``: a reader that stops early ends rota quietly, no traceback.

Each command runs as a real process with its stdout on a real pipe whose only
reader, ``head -1``, has already read its line and exited: every write rota
makes gets EPIPE, as when ``head`` quits in the middle of a long listing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from tests.support.api_support import rota_cmd
from tests.support.db_support import sqlite_copy_url
from tests.support.executor_support import add_jobs, job_type, store_types

SCHEDULES = """\
job_types:
  t:
    handler: tests.handlers.plain:noop
schedules:
  nightly:
    job_type: t
    cron: "0 2 * * *"
    timezone: Europe/Berlin
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> tuple[str, Path]:
    """A database with a schedule and jobs to list (SQLite: the point is the pipe)."""
    where = tmp_path_factory.mktemp("pipe")
    url = sqlite_copy_url(sqlite_template, where / "rota.db")
    path = where / "schedules.yaml"
    path.write_text(SCHEDULES)
    subprocess.run(rota_cmd("apply", str(path), "--db", url), check=True, capture_output=True)
    engine = create_engine(url)
    try:
        store_types(engine, job_type("t"))
        add_jobs(engine, job_type("t"), 50)
    finally:
        engine.dispose()
    return url, path


def run_into_closed_pipe(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    head = subprocess.Popen(["head", "-1"], stdin=read_end, stdout=subprocess.DEVNULL)
    os.close(read_end)  # head holds the only read end now
    os.write(write_end, b"one line\n")
    assert head.wait(timeout=30) == 0  # it read its line and is gone
    try:
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)


LISTINGS = [
    ["workers"],
    ["workers", "--json"],
    ["jobs"],
    ["schedules", "--json"],
    ["audit"],
    ["preview", "{file}", "nightly", "--count", "100", "--json"],
    ["apply", "{file}", "--dry-run", "--simulate", "30d"],
    ["check", "{file}"],
    ["--help"],
    ["--version"],
]


@pytest.mark.parametrize("argv", LISTINGS, ids=" ".join)
def test_a_listing_into_a_pipe_closed_early_ends_quietly(
    setup: tuple[str, Path], argv: list[str]
) -> None:
    url, path = setup
    words = [w.replace("{file}", str(path)) for w in argv]
    if argv[0] not in ("--help", "--version", "check"):
        words += ["--db", url]
    done = run_into_closed_pipe(rota_cmd(*words))
    err = done.stderr.decode()
    # 128 + SIGPIPE, as a shell shows a tool the pipe stopped; argparse's own
    # --help output ignores a write error and ends 0.
    assert done.returncode == (0 if argv == ["--help"] else 141), err
    assert err == ""


def test_the_same_listing_into_a_reading_pipe_is_whole(setup: tuple[str, Path]) -> None:
    """The control: with a reader that reads everything, nothing is cut."""
    url, _ = setup
    done = subprocess.run(rota_cmd("jobs", "--db", url), capture_output=True, timeout=120)
    assert done.returncode == 0 and done.stderr == b""
    assert len(done.stdout.splitlines()) >= 50
