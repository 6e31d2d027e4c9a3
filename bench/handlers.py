"""Handlers the benchmarks run (job types ``bench.noop`` and ``bench.wakeup``).

The executor imports them by name (``bench.handlers:noop``), so an executor
process started from the repository root finds them.
"""

from __future__ import annotations

import socket
import time

from rota.executor.context import JobContext


def noop(ctx: JobContext) -> None:
    """Do nothing: the benchmark measures the executor's own cost per job."""
    return None


def record_start(ctx: JobContext) -> None:
    """Send ``"<seq> <time.time() at handler start>"`` to the UDP port in ``ctx.args``.

    The benchmark waits on that socket, so it learns the start without polling.
    """
    started = time.time()
    message = f"{ctx.args['seq']} {started!r}".encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(message, ("127.0.0.1", int(ctx.args["port"])))
