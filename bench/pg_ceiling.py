"""The PostgreSQL ceiling: pgbench, one single-row UPDATE per transaction.

Every rota benchmark prints its figures next to this number, measured in the
same run on the same machine, because these machines are noisy: the ratio is
what compares across runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile

import psycopg

_SCRIPT = "\\set id random(1, 1000)\nUPDATE rota_bench_ceiling SET n = n + 1 WHERE id = :id;\n"


def pgbench_single_row_update_tps(libpq_url: str, clients: int, seconds: int = 5) -> float:
    """Transactions per second of single-row updates with ``clients`` connections."""
    pgbench = shutil.which("pgbench")
    if pgbench is None:
        raise RuntimeError("pgbench is not installed (Debian: apt-get install postgresql-client)")
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS rota_bench_ceiling")
        conn.execute("CREATE TABLE rota_bench_ceiling (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute("INSERT INTO rota_bench_ceiling SELECT g, 0 FROM generate_series(1, 1000) g")
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
            script.write(_SCRIPT)
            script.flush()
            out = subprocess.run(
                [
                    pgbench,
                    "-n",
                    "-c",
                    str(clients),
                    "-j",
                    str(clients),
                    "-T",
                    str(seconds),
                    "-f",
                    script.name,
                    libpq_url,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
    finally:
        with psycopg.connect(libpq_url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS rota_bench_ceiling")
    match = re.search(r"tps = ([0-9.]+)", out)
    if match is None:
        raise RuntimeError(f"cannot read pgbench output:\n{out}")
    return float(match.group(1))


if __name__ == "__main__":
    import sys

    url = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
    for c in (1, 2, 4):
        print(
            f"pgbench single-row update, {c} connection(s): "
            f"{pgbench_single_row_update_tps(url, c):,.0f} tps"
        )
