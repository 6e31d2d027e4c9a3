"""`rota job ID --output [--attempt N] [--json]` through the real entry point, both backends."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.core.claimed import Renewal
from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_lease import renew_leases_if_held
from tests.support.executor_support import (
    StartExecutor,
    add_jobs,
    claim_as,
    state_is,
    store_types,
    wait_for,
)


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_output_is_printed_as_kept_and_says_what_was_dropped(
    engine: Engine,
    db_url: str,
    start_executor: StartExecutor,
    capsys: pytest.CaptureFixture[str],
) -> None:
    quiet = JobTypeSpec(name="quiet", command=("true",))
    loud = JobTypeSpec(name="loud", command=("sh", "-c", "seq 1 40000"))
    store_types(engine, quiet, loud)
    (quiet_id,) = add_jobs(engine, quiet)
    (loud_id,) = add_jobs(engine, loud)
    start_executor()
    for job_id in (quiet_id, loud_id):
        wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")

    code, out, err = rota(capsys, "job", str(quiet_id), "--output", "--db", db_url)
    assert (code, out, err) == (0, "", "")  # ran, wrote nothing

    code, out, err = rota(capsys, "job", str(loud_id), "--output", "--db", db_url)
    assert code == 0 and out.endswith("39999\n40000\n") and len(out.encode()) == 65536
    assert "earlier bytes not kept" in err

    code, out, _ = rota(capsys, "job", str(loud_id), "--output", "--json", "--db", db_url)
    data = json.loads(out)
    assert data["attempt"] == 1 and data["outcome"] == "SUCCEEDED"
    assert data["output"].endswith("40000\n") and data["dropped_bytes"] > 100_000


def test_a_job_without_attempts_has_no_output(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = JobTypeSpec(name="quiet", command=("true",))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    code, out, err = rota(capsys, "job", str(job_id), "--output", "--db", db_url)
    assert code == 2 and out == ""
    assert f"job {job_id} has no attempts yet" in err


def test_a_handlers_escape_sequences_never_reach_the_terminal(
    engine: Engine,
    db_url: str,
    start_executor: StartExecutor,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ESC, BEL and CR a command wrote are shown as \\x1b, \\x07, \\x0d by `rota jobs`,
    `rota job` and `rota job --output` on a terminal; `--output` into a pipe stays exact."""
    hostile = "x\x1b]0;pwned\x07\x1b[2J\ty"
    spec = JobTypeSpec(
        name="esc",
        command=("sh", "-c", 'printf "%s\\r\\n" "$0"; printf "%s" "$0" >&2; exit 4', hostile),
        max_attempts=1,
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")

    for argv in (["jobs"], ["job", str(job_id)]):
        code, out, _ = rota(capsys, *argv, "--db", db_url)
        assert code == 0 and "pwned" in out
        assert not {"\x1b", "\x07"} & set(out), out
        assert "x\\x1b]0;pwned\\x07\\x1b[2J" in out

    code, out, _ = rota(capsys, "job", str(job_id), "--output", "--db", db_url)
    assert code == 0 and hostile + "\r\n" in out  # a pipe or a file gets what was written

    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from rota.cli.main import main; sys.exit(main())",
                "job",
                str(job_id),
                "--output",
                "--db",
                db_url,
            ],
            stdout=terminal,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    assert done.returncode == 0, done.stderr
    assert b"pwned" in shown and not {0x1B, 0x07} & set(shown), shown
    assert b"x\\x1b]0;pwned\\x07\\x1b[2J\ty" in shown and b"\\x0d" in shown


def test_a_running_attempt_shows_what_its_renewals_kept(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = JobTypeSpec(name="long", command=("true",))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    (held,) = claim_as(engine, "w1", 1)
    code, out, err = rota(capsys, "job", str(job_id), "--output", "--db", db_url)
    assert (code, out) == (0, "")
    assert "attempt 1 is still running: it had written nothing at its last lease renewal" in err
    with engine.begin() as conn:
        renewal = Renewal(job_id, held.lease_generation, output="halfway\n")
        assert renew_leases_if_held(conn, owner="w1", renewals=[renewal])
    code, out, err = rota(capsys, "job", str(job_id), "--output", "--db", db_url)
    assert (code, out) == (0, "halfway\n")
    assert "attempt 1 is still running: its output up to its last lease renewal follows" in err
