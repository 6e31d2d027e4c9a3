"""Enqueue and the first job: one job enqueued at idle, until its handler has started.

For each backend (PostgreSQL, SQLite), one ``rota executor`` started with
``--db`` and no other flag (the defaults: what a user runs) and, for the HTTP
path, one ``rota serve`` (``--db``, ``--host 127.0.0.1``, a free ``--port``,
``ROTA_API_TOKEN`` set: the flags a server needs to listen and to accept a
token, nothing tuned). Then ``--trials`` times, at idle (a random 20 to 50 ms
pause between trials, the executor has nothing else to do):

* Python API: ``with engine.begin() as conn: rota.enqueue(conn, ...)``: the
  clock starts just before the ``begin`` and the enqueue, so the enqueue and
  its commit count;
* ``POST /jobs``: the clock starts just before the request is sent on a
  keep-alive connection, so the request, its transaction and the answer count.

The clock stops when the job's handler starts (``bench.handlers:record_start``
sends ``time.time()`` over UDP to the benchmark). Printed: p50, p99 and max in
milliseconds per path and backend. The issue's targets: p99 under 20 ms on
PostgreSQL, under 50 ms on SQLite.

Run: ``python -m bench.bench_first_job [--trials 1000] [--backends postgresql,sqlite]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.bench_executor import (
    DEFAULT_PG_URL,
    WAKEUP,
    Database,
    Executors,
    fresh_database,
    start_executors,
)
from rota import enqueue
from rota.core.database import make_engine

ROOT = Path(__file__).resolve().parent.parent
WARMUPS = 5  # start-up, first imports, first plans: not counted


@dataclass
class Latencies:
    backend: str
    path: str
    ms: list[float]

    def pct(self, q: float) -> float:
        ordered = sorted(self.ms)
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]

    def line(self) -> str:
        return (
            f"  {self.backend:<11} {self.path:<22} {len(self.ms):>6} "
            f"{self.pct(0.50):>8.1f} {self.pct(0.99):>8.1f} {max(self.ms):>8.1f}"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """``rota serve`` on a free loopback port with a token, and one keep-alive connection."""

    def __init__(self, db: Database, workdir: Path) -> None:
        self.port = _free_port()
        self.token = uuid.uuid4().hex
        self._log = (workdir / f"serve-{db.backend}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rota.cli.main",
                "serve",
                "--db",
                db.url,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "ROTA_API_TOKEN": self.token},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("rota serve did not start") from None
                time.sleep(0.1)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "X-Rota-Request": "1",
        }

    def post(self, body: dict[str, object]) -> None:
        self.conn.request("POST", "/jobs", body=json.dumps(body), headers=self.headers)
        response = self.conn.getresponse()
        text = response.read()
        if response.status not in (200, 201, 202):
            raise RuntimeError(f"POST /jobs answered {response.status}: {text[:300]!r}")

    def stop(self) -> None:
        self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _wait_start(sock: socket.socket, seq: int, executors: Executors) -> float:
    deadline = time.monotonic() + 60
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            executors.check_alive()
            raise RuntimeError(f"job {seq} did not start within 60 s")
        sock.settimeout(min(left, 1.0))
        try:
            data = sock.recv(256)
        except TimeoutError:
            executors.check_alive()
            continue
        got, started = data.decode().split()
        if int(got) == seq:
            return float(started)


def _trials(
    send: Callable[[int], float],
    sock: socket.socket,
    executors: Executors,
    trials: int,
    base: int,
) -> list[float]:
    """``send(seq)`` enqueues job ``seq`` and returns the instant its clock started.

    Jobs are numbered from ``base``, so no packet of an earlier path's job matches.
    """
    rng = random.Random(7)
    out: list[float] = []
    for i in range(-WARMUPS, trials):
        seq = base + WARMUPS + i
        t0 = send(seq)
        started = _wait_start(sock, seq, executors)
        if i >= 0:
            out.append((started - t0) * 1000)
        time.sleep(rng.uniform(0.020, 0.050))  # idle again before the next one
    return out


def measure(backend: str, admin_url: str, trials: int, workdir: Path) -> list[Latencies]:
    with (
        fresh_database(backend, admin_url) as db,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock,
    ):
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        executors = start_executors(db, 1, None, workdir, tag=f"{backend}-first")
        engine = make_engine(db.url)
        server = Server(db, workdir)
        try:

            def python_api(seq: int) -> float:
                t0 = time.time()
                with engine.begin() as conn:
                    enqueue(conn, WAKEUP.name, args={"port": port, "seq": seq})
                return t0

            def post(seq: int) -> float:
                t0 = time.time()
                server.post({"job_type": WAKEUP.name, "args": {"port": port, "seq": seq}})
                return t0

            api = _trials(python_api, sock, executors, trials, 0)
            http_ms = _trials(post, sock, executors, trials, trials + WARMUPS)
        finally:
            server.stop()
            engine.dispose()
            executors.stop()
    return [
        Latencies(backend, "rota.enqueue + commit", api),
        Latencies(backend, "POST /jobs", http_ms),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_first_job",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trials", type=int, default=1000, help="jobs per path and backend")
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    print(
        f"enqueue at idle until the handler starts: {args.trials} trials per path and backend, "
        f"1 `rota executor --db URL` (the defaults), {os.cpu_count()} CPU(s)",
        flush=True,
    )
    results: list[Latencies] = []
    with tempfile.TemporaryDirectory(prefix="rota_bench_first_") as tmp:
        for backend in backends:
            results += measure(backend, args.pg_url, args.trials, Path(tmp))
    print(
        f"\n  {'backend':<11} {'path':<22} {'trials':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )
    for r in results:
        print(r.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
