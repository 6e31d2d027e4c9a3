"""A PostgreSQL cluster of the soak's own: initdb into a temporary directory, a free port.

The machine's binaries (``/usr/lib/postgresql/*/bin``, newest first) or, where
none are installed, those the ``pgserver`` package ships. Run as root, the
server runs as the ``postgres`` user (initdb refuses root). Never the shared
server: the soak stops its own cluster hard (``pg_ctl stop -m immediate``) and,
with ``--failover``, promotes a streaming standby made by ``pg_basebackup -R``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psycopg

SUPERUSER = "postgres"


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl (``ROTA_SOAK_PG=pgserver``: pgserver's)."""
    found = (
        []
        if os.environ.get("ROTA_SOAK_PG") == "pgserver"
        else sorted(
            glob.glob("/usr/lib/postgresql/*/bin"),
            key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        )
    )
    for candidate in reversed(found):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    try:
        import pgserver
    except ImportError as exc:
        raise RuntimeError(
            "no PostgreSQL binaries in /usr/lib/postgresql/*/bin and no pgserver package "
            "(pip install -e '.[test]')"
        ) from exc
    bindir = Path(pgserver.__file__).parent / "pginstall" / "bin"
    if not (bindir / "initdb").exists():
        raise RuntimeError(f"pgserver is installed but has no initdb in {bindir}")
    return bindir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    """One PostgreSQL server (a primary or a standby) in its own data directory."""

    def __init__(self, bindir: Path, root: Path, name: str) -> None:
        self.bindir = bindir
        self.root = root
        self.name = name
        self.datadir = root / name
        self.port = free_port()
        self.logfile = root / f"{name}.log"
        self._as_postgres = os.geteuid() == 0
        self._user: int | None = None
        self._group: int | None = None
        if self._as_postgres:
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError(
                    "running as root needs a 'postgres' user to run the soak's server"
                ) from exc
            self._user, self._group = entry.pw_uid, entry.pw_gid

    def _run(self, *argv: str, timeout: float = 120) -> None:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=self._user,
            group=self._group,
            cwd=self.root,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-800:]}"
            )

    def chown_root(self) -> None:
        if self._as_postgres:
            assert self._user is not None and self._group is not None
            os.chown(self.root, self._user, self._group)

    def initdb(self) -> None:
        self._run("initdb", "-D", str(self.datadir), "-U", SUPERUSER, "--auth=trust", "-N")
        self.configure(
            listen_addresses="'127.0.0.1'",
            unix_socket_directories=f"'{self.root}'",
            max_connections="200",
            fsync="off",  # the soak kills processes, never the machine: no fsync needed
            wal_level="replica",
            max_wal_senders="5",
            hot_standby="on",
            wal_keep_size="'256MB'",
        )
        with (self.datadir / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")

    def configure(self, **settings: str) -> None:
        with (self.datadir / "postgresql.conf").open("a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = {value}\n")
            conf.write(f"port = {self.port}\n")  # the last setting of a name wins

    def basebackup_from(self, primary: Node) -> None:
        """A streaming standby of ``primary`` (``pg_basebackup -R``: standby.signal)."""
        self._run(
            "pg_basebackup",
            "-D",
            str(self.datadir),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            SUPERUSER,
            "-R",
            "-X",
            "stream",
            "--checkpoint=fast",
            timeout=300,
        )
        # Standby's own port; the copied postgresql.conf names the primary's.
        self.configure()
        auto = self.datadir / "postgresql.auto.conf"
        text = auto.read_text()
        auto.write_text(
            text.replace(
                "primary_conninfo = '", f"primary_conninfo = 'application_name={self.name} "
            )
        )

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-w", "-t", "60", "start"
        )

    def stop_immediate(self) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-m", "immediate", "-w", "stop")

    def stop_fast(self) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "-t", "60", "stop")

    def promote(self) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-w", "-t", "60", "promote")

    def running(self) -> bool:
        return (self.datadir / "postmaster.pid").exists()

    def url(self, dbname: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def wait_writable(self, dbname: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(dbname), connect_timeout=3) as conn:
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    if row is not None and not row[0]:
                        return
            except psycopg.Error:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} is not writable after {timeout:.0f}s")
            time.sleep(0.1)


class Cluster:
    """The soak's primary and, with ``standby=True``, a synchronous streaming standby."""

    DBNAME = "soak"

    def __init__(self, root: Path, *, standby: bool) -> None:
        self.root = root
        self.bindir = find_bindir()
        self.primary = Node(self.bindir, root, "primary")
        self.primary.chown_root()
        self.standby = Node(self.bindir, root, "standby") if standby else None
        self.current = self.primary

    def create(self) -> None:
        self.primary.initdb()
        self.primary.start()
        with psycopg.connect(self.primary.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.DBNAME}")
        if self.standby is not None:
            self.standby.basebackup_from(self.primary)
            self.standby.start()
            # After the base backup, so the standby (once promoted) does not wait
            # for a standby of its own: only the primary commits synchronously.
            with psycopg.connect(self.primary.url("postgres"), autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                conn.execute("SELECT pg_reload_conf()")
            self._wait_synchronous()

    def _wait_synchronous(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with psycopg.connect(self.primary.url("postgres"), autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"
                ).fetchone()
            if row is not None and row[0] >= 1:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not become a synchronous standby")
            time.sleep(0.2)

    def rota_url(self) -> str:
        """The URL the rota processes use: multi-host with a standby, else the primary."""
        if self.standby is None:
            return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.primary.port}/{self.DBNAME}"
        return (
            f"postgresql+psycopg://{SUPERUSER}@/{self.DBNAME}"
            f"?host=127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            "&target_session_attrs=read-write&connect_timeout=3"
        )

    def destroy(self) -> None:
        for node in (self.primary, self.standby):
            if node is not None and node.running():
                with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                    node.stop_immediate()
        shutil.rmtree(self.root, ignore_errors=True)
