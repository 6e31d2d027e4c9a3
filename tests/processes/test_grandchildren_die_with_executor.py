"""What a ``command:`` or isolated child starts dies with a SIGKILLed executor too.

A ``command:`` is often a shell script running the real program as its child
(``sh -c 'prog; notify'``, a wrapper script without ``exec``). PDEATHSIG reaches
only the executor's direct child: the program it started keeps running,
re-parented to init, while the sweeper hands the job to another executor.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.core.config import Isolation
from tests.support.executor_support import (
    Executors,
    add_jobs,
    alive,
    assert_dies_with_its_executor,
    job_type,
    pid_in,
    store_types,
    wait_for,
)

pytestmark = pytest.mark.slow


def _queue_a_command_with_a_grandchild(engine: Engine, pidfile: Path) -> None:
    """A job whose command starts a child (``sleep``) and writes its pid to ``pidfile``."""
    spec = job_type(
        "cmd",
        handler=None,
        command=(
            "sh",
            "-c",
            f'sleep 300 & echo $! > "{pidfile}.tmp" && mv "{pidfile}.tmp" "{pidfile}"; wait',
        ),
    )
    store_types(engine, spec)
    add_jobs(engine, spec)


def test_a_command_grandchild_assert_dies_with_its_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    _queue_a_command_with_a_grandchild(engine, pidfile)
    assert_dies_with_its_executor(executors, pids, "grandchild", lambda: pid_in(pidfile))


# Loaded by the executor at start (``sitecustomize`` on its PYTHONPATH): the
# executor SIGKILLs itself as soon as the command's ``Popen`` has returned and
# the command's child is running, before anything else it would do next.
_DIES_RIGHT_AFTER_THE_COMMAND_STARTS = """
import os, signal, subprocess, time
_real = subprocess.Popen
class _Popen(_real):
    def __init__(self, args, *rest, **kwargs):
        super().__init__(args, *rest, **kwargs)
        if list(args)[:1] == ["sh"]:
            deadline = time.monotonic() + 30
            while not os.path.exists({pidfile!r}) and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
subprocess.Popen = _Popen
"""


def test_a_command_grandchild_dies_with_an_executor_killed_the_moment_it_started_it(
    engine: Engine,
    executors: Executors,
    tmp_path: Path,
    pids: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watcher of a command's group exists before the command runs (it was
    started after it: an executor killed in between left the grandchild running)."""
    pidfile = tmp_path / "grandchild.pid"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        _DIES_RIGHT_AFTER_THE_COMMAND_STARTS.format(pidfile=str(pidfile))
    )
    monkeypatch.setenv("PYTHONPATH", str(hook))
    _queue_a_command_with_a_grandchild(engine, pidfile)
    proc = executors.start("--poll-interval", "0.1")
    pid: int = wait_for(lambda: pid_in(pidfile), timeout=30, what="the grandchild to start")
    pids.append(pid)
    assert proc.wait(30) == -signal.SIGKILL  # it killed itself, as arranged
    wait_for(lambda: not alive(pid), timeout=10, what=f"the grandchild (pid {pid}) to die")


def test_an_isolated_handlers_helper_assert_dies_with_its_executor(
    engine: Engine, executors: Executors, tmp_path: Path, pids: list[int]
) -> None:
    pidfile = tmp_path / "helper.pid"
    spec = job_type(
        "iso", handler="tests.handlers.spawning:spawn_then_wait", isolation=Isolation.PROCESS
    )
    store_types(engine, spec)
    add_jobs(engine, spec, args={"file": str(pidfile)})
    assert_dies_with_its_executor(executors, pids, "helper", lambda: pid_in(pidfile))
