"""A real PgBouncer in transaction mode on a free port, for the pooler bench and tests.

Debian's ``pgbouncer`` binary; ``auth_type = trust`` in front of a trust-auth test
server. ``PgBouncerAbsent`` says the binary is not installed, so a test can skip
with that reason and a bench can say so.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

STATS_PERIOD_SECONDS = 1
SERVER_COUNTERS = ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")


class PgBouncerAbsent(RuntimeError):
    """The ``pgbouncer`` binary is not installed."""


def pgbouncer_binary() -> str:
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None
    )
    if found is None:
        raise PgBouncerAbsent("the pgbouncer binary is absent (Debian package pgbouncer)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgBouncer:
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def url(self, direct_url: str) -> str:
        """``direct_url`` (SQLAlchemy form) with the host and port of this PgBouncer."""
        u = make_url(direct_url)
        query = {k: v for k, v in u.query.items() if k not in ("host", "port")}
        u = u.set(host="127.0.0.1", port=self.port, query=query)
        return u.render_as_string(hide_password=False)

    def server_connections(self, dbname: str) -> int:
        """Server connections of ``dbname``'s pools, from the admin console's SHOW POOLS."""
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} dbname=pgbouncer user=postgres", autocommit=True
        ) as conn:
            cur = conn.execute("SHOW POOLS")
            names = [c.name for c in cur.description or ()]
            total = 0
            for row in cur.fetchall():
                pool = dict(zip(names, row, strict=True))
                if pool["database"] == dbname:
                    total += sum(int(pool[k]) for k in SERVER_COUNTERS)
            return total

    def stats(self, dbname: str) -> dict[str, int]:
        """``dbname``'s counters from the admin console's SHOW STATS (totals so far)."""
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} dbname=pgbouncer user=postgres", autocommit=True
        ) as conn:
            cur = conn.execute("SHOW STATS")
            names = [c.name for c in cur.description or ()]
            for row in cur.fetchall():
                found = dict(zip(names, row, strict=True))
                if found["database"] == dbname:
                    return {k: int(v) for k, v in found.items() if k.startswith("total_")}
            return {}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def start_pgbouncer(workdir: Path, server_url: str, pool_size: int) -> PgBouncer:
    """A PgBouncer (``pool_mode = transaction``, ``default_pool_size = pool_size``) in
    front of ``server_url``'s server, accepting connections when this returns."""
    binary = pgbouncer_binary()
    server = make_url(server_url)
    # A server found on a Unix socket (pgserver) names it in ?host=.
    host = str(server.query.get("host") or server.host or "127.0.0.1")
    server_port = str(server.query.get("port") or server.port or 5432)
    port = free_port()
    ini = workdir / "pgbouncer.ini"
    users = workdir / "userlist.txt"
    users.write_text('"postgres" ""\n')
    ini.write_text(
        "[databases]\n"
        f"* = host={host} port={server_port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {users}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\n"
        "max_client_conn = 1000\nadmin_users = postgres\n"
        # SHOW STATS totals move once a period: each second, for the bench's deltas.
        f"stats_period = {STATS_PERIOD_SECONDS}\n"
    )
    log_path = workdir / "pgbouncer.log"
    # PgBouncer refuses to run as root; it reads its files before it drops to -u.
    user = ["-u", "nobody"] if os.geteuid() == 0 else []
    with log_path.open("wb") as log:
        process = subprocess.Popen([binary, *user, str(ini)], stdout=log, stderr=subprocess.STDOUT)
    bouncer = PgBouncer(port, process, log_path)
    deadline = time.monotonic() + 10
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited: {log_path.read_text()[-2000:]}")
        try:
            bouncer.server_connections("-")
            return bouncer
        except psycopg.Error:
            if time.monotonic() > deadline:
                bouncer.stop()
                raise RuntimeError("pgbouncer did not accept connections within 10 s") from None
            time.sleep(0.05)
