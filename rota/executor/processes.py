"""Child processes of the executor: their process groups, and dying with the executor.

Every child (a ``command:`` handler, an ``isolation: process`` handler) leads a
process group of its own, so that stopping it stops what it started too. It
also dies with the executor: if the executor is SIGKILLed, the kernel sends its
children SIGKILL (Linux ``PR_SET_PDEATHSIG``, set in the child between fork and
exec), so the sweeper never hands their job to another executor while the old
run goes on. The signal follows the *thread* that started the child: children
are started by worker slot threads, which live as long as the executor.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no libc symbol: children then outlive a killed executor
        return None
    return prctl


_prctl = _load_prctl()  # resolved once, here, never in a freshly forked child


def die_with_parent(watch: GroupWatch | None = None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die with this process (None where unsupported).

    It runs in the child after fork, before exec: it only calls prctl(2),
    getppid(2) and, with ``watch``, write(2) and close(2); it takes no lock and
    allocates nothing of note. If this process died before prctl took effect,
    the child has been re-parented already and kills itself. With ``watch``
    (a command in a session of its own), the child then tells the watcher its
    group id, before it runs anything.
    """
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()
    report = None if watch is None else watch.report_fd

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        if report is not None:
            os.write(report, b"%d\n" % os.getpid())
            os.close(report)

    return preexec


# The watcher of a command's process group: a Python without site or user paths.
# The group id arrives on stdin from the command itself, before its exec;
# nothing (end of file) if the command never started.
_WATCHER = (
    "import os, signal, sys\n"
    "group = sys.stdin.readline().strip()\n"
    "signal.sigwait({signal.SIGTERM})\n"  # SIGTERM: blocked since before exec
    "if group: os.killpg(int(group), signal.SIGKILL)\n"
)


@dataclass
class GroupWatch:
    """A started watcher, and the pipe end on which the command reports its group."""

    watcher: subprocess.Popen[bytes]
    report_fd: int | None  # ours until the command has started: see ``started``

    def started(self) -> None:
        """The command was started (or failed to): this process's copy of the pipe goes."""
        if self.report_fd is not None:
            os.close(self.report_fd)
            self.report_fd = None


def watch_group() -> GroupWatch | None:
    """Start a watcher that SIGKILLs the next command's process group if this process dies.

    PDEATHSIG kills a ``command:`` child with its executor, but not what the
    command started (``sh -c 'prog; notify'``, a wrapper script without
    ``exec``): that would keep running while the sweeper hands the job to
    another executor. The command's group is in a session of its own, so the
    watcher cannot join it: it waits outside it for SIGTERM, its own death
    signal, and then kills the group.

    Started before the command, which writes its group id to the watcher
    (``die_with_parent(watch)``, ``pass_fds=(watch.report_fd,)``) between
    fork and exec: from the command's first instruction on, the executor's
    death kills the group. (Started after it, an executor killed in between
    left the command's children running.) Call ``started`` once ``Popen``
    returned or failed; stop it with ``end_watch`` while this process still
    has the command unreaped (its group id cannot be reused).
    """
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the executor died already: no command to watch
            os._exit(0)

    read_fd, report_fd = os.pipe()
    try:
        watcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER],
            stdin=read_fd,
            start_new_session=True,
            preexec_fn=preexec,
        )
    except (OSError, subprocess.SubprocessError):  # no watcher: PDEATHSIG still holds
        os.close(report_fd)
        return None
    finally:
        os.close(read_fd)
    return GroupWatch(watcher, report_fd)


def end_watch(watch: GroupWatch | None) -> None:
    if watch is not None:
        watch.started()
        with contextlib.suppress(OSError):
            watch.watcher.kill()
        watch.watcher.wait()


def fork_group_guard(close_fd: int) -> int | None:
    """Fork a watcher that SIGKILLs this process group once this process has died.

    For a child that leads its own group (an ``isolation: process`` child):
    PDEATHSIG kills the child with its executor, but not what its handler
    started (a helper program), and the child's own clean-up never runs after a
    SIGKILL. The watcher (a fork, which does not inherit the child's PDEATHSIG)
    asks for SIGTERM when the child dies, waits for it, and kills the group.
    Call it before any thread starts; the child kills and reaps the watcher
    (``end_group_guard``) before it exits. Returns its pid (None where
    unsupported). ``close_fd``: the executor's socket, closed in the watcher.
    """
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        return pid
    try:  # the watcher: no Python beyond this, and never back to the caller
        os.close(close_fd)
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() == parent:
            signal.sigwait({signal.SIGTERM})
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def end_group_guard(pid: int | None) -> None:
    """Stop the watcher of ``fork_group_guard`` and reap it (no zombie under a PID 1 executor)."""
    if pid is None:
        return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def kill_process_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Signal every process of the group ``proc`` leads (it was started in a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
