"""Enqueue rates on PostgreSQL, each next to its same-run ceiling.

1. ``rota.enqueue_many``: N jobs in batches of B (one transaction per batch,
   job types looked up per call as an application's call does). Ceiling: the
   same rows inserted by psycopg alone into a table built ``LIKE jobs
   INCLUDING ALL`` (same columns, defaults and indexes), one ``INSERT ...
   SELECT FROM unnest(arrays)`` per batch of B, the values prepared before the
   clock starts: what the database and the driver cost without rota's Python.
   Target: >= 50,000 jobs/s.
2. ``rota enqueue`` (the command line): one process per job, each a new
   connection and one transaction. Ceilings: ``psql -c "INSERT ..."`` per call
   (a process, a connection, a transaction) and pgbench's single-row UPDATE on
   one connection (a transaction, no process or connection).
3. ``POST /jobs``: ``rota serve`` started on a free port, jobs posted one
   request at a time over one HTTP/1.1 keep-alive connection. Ceiling:
   pgbench's single-row UPDATE on one connection.

Run: ``python -m bench.bench_enqueue [--jobs 200000] [--batch 1000] [--cli-calls 30]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.bench_executor import DEFAULT_PG_URL, NOOP, fresh_database, libpq
from bench.pg_ceiling import pgbench_single_row_update_tps
from rota import JobRequest, enqueue_many
from rota.core.database import make_engine
from rota.core.ids import new_job_ids

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Rate:
    what: str
    count: int
    seconds: float
    ceiling: float | None = None  # same unit as ``per_second``
    ceiling_what: str = ""

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    def line(self) -> str:
        text = f"  {self.what:<44} {_rate(self.per_second):>10}/s"
        if self.ceiling:
            text += (
                f"   ceiling {_rate(self.ceiling):>10}/s ({self.ceiling_what})   "
                f"ratio {self.per_second / self.ceiling:.2f}"
            )
        return text


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def enqueue_many_rate(url: str, count: int, batch: int) -> float:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:  # warm: connection, job type, statement
            enqueue_many(conn, [JobRequest(NOOP.name)])
        started = time.perf_counter()
        for start in range(0, count, batch):
            n = min(batch, count - start)
            with engine.begin() as conn:
                enqueue_many(conn, [JobRequest(NOOP.name, args={"i": start + i}) for i in range(n)])
        return count / (time.perf_counter() - started)
    finally:
        engine.dispose()


_RAW_INSERT = """
    INSERT INTO raw_jobs (job_id, job_type, pool, priority, max_attempts, lease_seconds,
                          idempotent, args, run_after, state, attempt_count,
                          created_at, updated_at)
    SELECT v.job_id, v.job_type, 'default', 0, 5, 60, true, v.args, now(), 'QUEUED', 0,
           now(), now()
    FROM unnest(%(ids)b::uuid[], %(types)b::text[], %(args)b::json[]) AS v(job_id, job_type, args)
"""


def raw_insert_rate(libpq_url: str, count: int, batch: int) -> float:
    """The same rows and indexes, psycopg alone: the ceiling of ``enqueue_many``."""
    with psycopg.connect(libpq_url) as conn:
        conn.execute("CREATE TABLE raw_jobs (LIKE jobs INCLUDING ALL)")
        conn.commit()
        batches = []
        for start in range(0, count, batch):
            n = min(batch, count - start)
            batches.append(
                {
                    "ids": new_job_ids(n),
                    "types": [NOOP.name] * n,
                    "args": [json.dumps({"i": start + i}) for i in range(n)],
                }
            )
        started = time.perf_counter()
        for params in batches:
            conn.execute(_RAW_INSERT, params)
            conn.commit()
        seconds = time.perf_counter() - started
        conn.execute("DROP TABLE raw_jobs")
        conn.commit()
    return count / seconds


def cli_rate(url: str, calls: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "rota.cli.main", "enqueue", NOOP.name, "--db", url]
    subprocess.run(argv, check=True, capture_output=True, env=env, cwd=ROOT)  # warm caches
    started = time.perf_counter()
    for i in range(calls):
        subprocess.run(
            [*argv, "--args", json.dumps({"i": i})],
            check=True,
            capture_output=True,
            env=env,
            cwd=ROOT,
        )
    return calls / (time.perf_counter() - started)


def psql_rate(libpq_url: str, calls: int) -> float | None:
    psql = shutil.which("psql")
    if psql is None:
        return None
    sql = (
        "INSERT INTO jobs (job_id, job_type, run_after, created_at, updated_at) "
        "VALUES (gen_random_uuid(), 'bench.noop', now(), now(), now())"
    )
    started = time.perf_counter()
    for _ in range(calls):
        subprocess.run([psql, "-q", "-X", "-c", sql, libpq_url], check=True, capture_output=True)
    return calls / (time.perf_counter() - started)


def post_jobs(url: str, requests: int) -> float:
    """``POST /jobs`` through ``rota serve``: requests per second.

    The server is started on a free port with ``ROTA_API_TOKEN`` set; each
    request is one ``POST /jobs`` of ``{"job_type": "bench.noop", "args":
    {...}}`` on one keep-alive connection, answered 202.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = uuid.uuid4().hex
    root = str(ROOT)
    env = {**os.environ, "PYTHONPATH": root, "ROTA_API_TOKEN": token}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rota.cli.main",
            "serve",
            "--db",
            url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("rota serve did not start") from None
                time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

        def post(i: int) -> None:
            body = json.dumps({"job_type": NOOP.name, "args": {"i": i}})
            conn.request("POST", "/jobs", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 202:
                raise RuntimeError(f"POST /jobs answered {response.status}")

        post(-1)  # warm
        started = time.perf_counter()
        for i in range(requests):
            post(i)
        return requests / (time.perf_counter() - started)
    finally:
        server.terminate()
        server.wait(timeout=30)


def run(admin_url: str, count: int, batch: int, cli_calls: int, http_requests: int) -> list[Rate]:
    rates: list[Rate] = []
    with fresh_database("postgresql", admin_url) as db:
        assert db.libpq_url is not None
        raw = raw_insert_rate(db.libpq_url, count, batch)
        many = enqueue_many_rate(db.url, count, batch)
        raw_after = raw_insert_rate(db.libpq_url, count, batch)  # either side of rota's run
        ceiling = (raw + raw_after) / 2
        rates.append(
            Rate(
                f"rota.enqueue_many, batches of {batch:,}",
                count,
                count / many,
                ceiling,
                "psycopg alone, same rows, indexes, batches",
            )
        )
        tps = pgbench_single_row_update_tps(db.libpq_url, clients=1, seconds=5)
        psql = psql_rate(db.libpq_url, cli_calls)
        cli = cli_rate(db.url, cli_calls)
        rates.append(
            Rate(
                "rota enqueue (one process per job)",
                cli_calls,
                cli_calls / cli,
                psql,
                "psql -c INSERT, one process per job",
            )
        )
        rates.append(
            Rate(
                "  the same, against pgbench on 1 connection",
                cli_calls,
                cli_calls / cli,
                tps,
                "pgbench single-row UPDATE, 1 connection",
            )
        )
        http_rate = post_jobs(db.url, http_requests)
        rates.append(
            Rate(
                "POST /jobs (rota serve, one keep-alive client)",
                http_requests,
                http_requests / http_rate,
                tps,
                "pgbench single-row UPDATE, 1 connection",
            )
        )
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_enqueue",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--cli-calls", type=int, default=30)
    parser.add_argument("--http-requests", type=int, default=2000)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    print(f"Enqueue on PostgreSQL ({os.cpu_count()} CPUs), each beside its same-run ceiling")
    for rate in run(libpq(args.pg_url), args.jobs, args.batch, args.cli_calls, args.http_requests):
        print(rate.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
