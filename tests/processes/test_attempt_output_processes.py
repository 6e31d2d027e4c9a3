"""An attempt's output end to end with real processes, on both backends: ``rota executor``
(its default log level), ``rota serve`` read by a viewer, and ``rota job ID --output
[--attempt N]``. ``rota apply`` and ``rota enqueue`` run in the test's process (the same
``main``), and so do the refusals of bad ``--attempt`` values, which end before any output
is read.
"""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from tests.api.surface import rota_serve
from tests.support import loopback
from tests.support.api_support import rota_cmd
from tests.support.executor_support import (
    REPO_ROOT,
    Executors,
    state_is,
    subprocess_env,
    wait_for,
)

pytestmark = pytest.mark.slow

SCHEDULES = """
job_types:
  nightly.cleanup:
    command: ["sh", "-c", "echo cleaning; echo 'a warning' >&2"]
  report.generate:
    handler: tests.handlers.output:says
  flaky:
    handler: tests.handlers.output:fails_first
    backoff: {base: 10ms, max: 20ms}
"""
VIEWER_TOKEN = "viewer-secret-1"


def rota(db_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        rota_cmd(*args),
        env=subprocess_env(db_url),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def in_process(capsys: pytest.CaptureFixture[str], db_url: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*args, "--db", db_url])
    out, err = capsys.readouterr()
    return code, out, err


def enqueue(capsys: pytest.CaptureFixture[str], db_url: str, *args: str) -> uuid.UUID:
    code, out, err = in_process(capsys, db_url, "enqueue", *args)
    assert code == 0, err
    return uuid.UUID(out.strip().split()[-1])


def test_output_comes_back_from_the_endpoint_and_the_command(
    db_url: str,
    engine: Engine,
    executors: Executors,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "schedules.yaml"
    config.write_text(SCHEDULES)
    code, _, err = in_process(capsys, db_url, "apply", str(config))
    assert code == 0, err
    command = enqueue(capsys, db_url, "nightly.cleanup")
    says = enqueue(capsys, db_url, "report.generate", "--args", '{"word": "hello"}')
    flaky = enqueue(capsys, db_url, "flaky")
    executors.start("--poll-interval", "0.1", ready=True)  # ready: logs at INFO, the default
    for job_id in (command, says, flaky):
        wait_for(state_is(engine, job_id, "SUCCEEDED"), timeout=60, what=f"{job_id} SUCCEEDED")

    digest = hashlib.sha256(VIEWER_TOKEN.encode()).hexdigest()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - name: vera\n    role: viewer\n    sha256: {digest}\n")
    with rota_serve(db_url, tmp_path, env={"ROTA_API_TOKENS_FILE": str(tokens)}) as served:
        viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
        r = loopback.get(f"{served.base}/jobs/{command}/attempts/1/output", headers=viewer)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert "cleaning\n" in r.text and "a warning\n" in r.text
        r = loopback.get(f"{served.base}/jobs/{says}/attempts/1/output", headers=viewer)
        assert r.status_code == 200, r.text
        assert "INFO rota.handler: ctx says hello\n" in r.text
        # The executor logs at INFO by default: the handler's own INFO records too.
        assert "INFO tests.handlers.output: own logger info hello\n" in r.text
        r = loopback.get(f"{served.base}/jobs/{says}/attempts/1/output")
        assert r.status_code == 401  # no token, no output

    shown = rota(db_url, REPO_ROOT, "job", str(command), "--output")
    assert shown.returncode == 0, shown.stderr
    assert "cleaning\n" in shown.stdout and "a warning\n" in shown.stdout
    shown = rota(db_url, REPO_ROOT, "job", str(flaky)[:8], "--output", "--attempt", "1")
    assert shown.returncode == 0, shown.stderr
    assert "attempt 1 speaking" in shown.stdout and "attempt 2" not in shown.stdout
    latest = rota(db_url, REPO_ROOT, "job", str(flaky), "--output")
    assert "attempt 2 speaking" in latest.stdout

    for args, message in (
        (["--output", "--attempt", "3"], "has no attempt 3"),
        (["--output", "--attempt", "0"], "is not an attempt number"),
        (["--output", "--attempt", "x\x01"], "is not an attempt number"),
        (["--attempt", "1"], "--attempt goes with --output"),
    ):
        code, _, err = in_process(capsys, db_url, "job", str(flaky), *args)
        assert code == 2, (args, err)
        assert message in err and "Traceback" not in err
