"""What the deployment kit's tests share: where the kit is, the validators, rota's parser."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rota.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent

# An executor's longest stop after SIGTERM is --drain-timeout, then these two
# (rota.executor's drain: STOP_GRACE_SECONDS, for the handlers still running to
# stop; WRITE_SECONDS, for the writes that release their jobs). Stated here, not
# imported, so that the kit's checks do not follow the executor's module layout.
STOP_GRACE_SECONDS = 2.0
RELEASE_WRITES_SECONDS = 10.0


def longest_executor_stop(drain_timeout: float) -> float:
    return drain_timeout + STOP_GRACE_SECONDS + RELEASE_WRITES_SECONDS


def tool(name: str, install: str) -> str:
    """The validator ``name``, from this interpreter's environment or the PATH; fails if absent."""
    beside = VENV_BIN / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed ({install}); CI installs it", pytrace=False)
    return found


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def parse_rota(words: list[str]) -> argparse.Namespace:
    """``words`` (after ``rota``) parsed by rota's own parser; a flag it refuses fails the test."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(words)
    except SystemExit:
        pytest.fail(f"rota refuses `rota {' '.join(words)}`: {err.getvalue().strip()}")
