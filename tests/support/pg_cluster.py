"""A PostgreSQL cluster of a test's own (initdb + pg_ctl on a free port), to stop and restart.

Never the shared server: tests that stop a server stop this one. As root, the
server runs as the ``postgres`` user (initdb refuses root).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _newest_bin() -> Path:
    """``ROTA_TEST_PG_BIN``, or the newest installed ``/usr/lib/postgresql/<version>/bin``."""
    if "ROTA_TEST_PG_BIN" in os.environ:
        return Path(os.environ["ROTA_TEST_PG_BIN"])
    versions = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if p.parent.name.isdigit()),
        key=lambda p: int(p.parent.name),
    )
    return versions[-1] if versions else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _newest_bin()


MEMORY_ROOT = Path("/dev/shm")


def _data_root() -> str | None:
    """Where a cluster's files go: the memory file system where there is one with room,
    else the system's temporary directory (``None``).

    Why: every test clones a database and drops it, about 300 new files each time. On
    ext4 each new file searches the inode bitmap past recently deleted inodes, and
    that search was most of a clone's cost: 0.43 s of kernel CPU per CREATE DATABASE
    against 0.02 s on tmpfs, and nearly a third of the whole suite's CPU. The data
    is thrown away at the end and runs with ``fsync=off`` already."""
    try:
        room = os.statvfs(MEMORY_ROOT)
    except OSError:
        return None
    if room.f_bavail * room.f_frsize < 2 << 30 or not os.access(MEMORY_ROOT, os.W_OK):
        return None
    return str(MEMORY_ROOT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        self.port = _free_port()
        self.user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [str(PG_BIN / argv[0]), *argv[1:]],
            check=True,
            capture_output=True,
            user=self.user,
            timeout=120,
            cwd=self.base,
        )

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        for _ in range(4):  # the free port found may be taken before the server binds it
            try:
                self.start()
                break
            except subprocess.CalledProcessError:
                log = (self.base / "server.log").read_text(errors="replace")
                if "could not bind" not in log and "already in use" not in log:
                    raise
                self.port = _free_port()
        else:
            raise RuntimeError(f"no free port for a test cluster in four tries: {self.base}")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "rota")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.base / "server.log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "immediate") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/rota"


@contextmanager
def own_cluster() -> Iterator[Cluster]:
    base = Path(tempfile.mkdtemp(prefix="rota-pg-", dir=_data_root()))
    cluster = Cluster(base)
    if cluster.user is not None:
        entry = pwd.getpwnam(cluster.user)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    try:
        cluster.init()
        yield cluster
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            cluster.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
