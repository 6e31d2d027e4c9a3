"""rota installs as one import name and works beside an application's own packages.

* The wheel built from this checkout holds ``rota/`` and its metadata only,
  ``top_level.txt`` says ``rota``, and ``py.typed`` ships.
* With a directory first on ``PYTHONPATH`` holding packages named like
  rota's layers (``core``, ``runtime``, ``cli``, ``executor``, ...: an
  application's own), the commands still work.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.executor_support import REPO_ROOT, wait_for

pytestmark = pytest.mark.slow

SHADOWS = (
    "shared",
    "core",
    "runtime",
    "producer",
    "operations",
    "cli",
    "executor",
    "scheduler",
    "migrations",
)


def test_the_wheel_holds_only_rota(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO_ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("rota-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert zf.read(top_level).decode().split() == ["rota"]
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"rota"}
    assert "rota/py.typed" in names
    assert "rota/migrations/script.py.mako" in names
    assert any(n.startswith("rota/migrations/versions/0001") for n in names)
    assert "rota = rota.cli.main:main" in entry_points


def _rota(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_commands_work_with_shadowing_packages_first_on_the_path(tmp_path: Path) -> None:
    shadow = tmp_path / "app"
    for name in SHADOWS:
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(
            f"raise ImportError('the application\\'s own {name} package was imported')\n"
        )
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(REPO_ROOT / "schedules.yaml", work / "schedules.yaml")
    shutil.copytree(REPO_ROOT / "examples", work / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    env["PYTHONPATH"] = str(shadow)
    db = ["--db", f"sqlite:///{work / 'rota.db'}"]
    for args in (["migrate", *db], ["enqueue", "demo.report", *db]):
        if args[0] == "enqueue":
            done = _rota(["apply", "schedules.yaml", *db], work, env)
            assert done.returncode == 0, done.stderr
        done = _rota(args, work, env)
        assert done.returncode == 0, done.stderr
    done = _rota(["jobs", *db], work, env)
    assert done.returncode == 0 and "demo.report" in done.stdout, done.stderr
    log = work / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rota.cli.main", "run", *db],
            cwd=work,
            env={**env, "ROTA_LOG_LEVEL": "DEBUG"},  # succeeded is a DEBUG line
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: "event=succeeded" in log.read_text() or proc.poll() is not None,
            timeout=60,
            what="rota run to run a job",
        )
        assert proc.poll() is None, log.read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
    assert code == 0, log.read_text()
    assert "Traceback" not in log.read_text()
