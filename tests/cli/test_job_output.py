"""`rota job ID --output [--attempt N] [--json]` through the real entry point, both backends."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.states import AttemptOutcome, JobState
from tests.support.executor_support import (
    StartExecutor,
    add_jobs,
    claim_as,
    renew_as,
    state_is,
    store_types,
    subprocess_env,
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
    assert renew_as(engine, "w1", job_id, held.lease_generation, output="halfway\n")
    code, out, err = rota(capsys, "job", str(job_id), "--output", "--db", db_url)
    assert (code, out) == (0, "halfway\n")
    assert "attempt 1 is still running: its output up to its last lease renewal follows" in err


def _read_line(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> bytes:
    """The next line ``proc`` writes, waiting at most ``timeout`` seconds for it."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no line in time"
    return proc.stdout.readline()


def test_follow_prints_what_each_renewal_brings_until_the_attempt_ends(
    engine: Engine, db_url: str
) -> None:
    """``--follow`` prints the tail, then each new part as the renewals keep it, then the
    outcome's last part, and ends with the attempt (saying how, on stderr)."""
    spec = JobTypeSpec(name="long", command=("true",))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    (held,) = claim_as(engine, "w1", 1)

    def renew(output: str) -> None:
        assert renew_as(engine, "w1", job_id, held.lease_generation, output=output)

    renew("first\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rota.cli.main", "job", str(job_id)[:8], "--output", "--follow"],
        env=subprocess_env(db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert _read_line(proc) == b"first\n"
        renew("first\nsecond\n")
        assert _read_line(proc) == b"second\n"
        done = Finish(
            job_id,
            held.lease_generation,
            JobState.SUCCEEDED,
            AttemptOutcome.SUCCEEDED,
            output="first\nsecond\nthird\n",
        )
        with engine.begin() as conn:
            assert finish_if_lease_held(conn, owner="w1", finishes=[done])
        assert _read_line(proc) == b"third\n"
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert b"attempt 1 ended: SUCCEEDED" in err


def test_follow_refuses_json_and_needs_output(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = JobTypeSpec(name="long", command=("true",))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    code, _, err = rota(capsys, "job", str(job_id), "--follow", "--db", db_url)
    assert code == 2 and "--follow goes with --output" in err
    code, _, err = rota(
        capsys, "job", str(job_id), "--output", "--follow", "--json", "--db", db_url
    )
    assert code == 2 and "--follow prints text as it comes" in err
