"""Database URL mistakes (issue 7, item 12): exit 2 with a message, and no password, ever.

Every case carries a recognisable password; each command's whole output
(stdout, stderr, logs) is searched for it and for the parts a resolver error
would show (the tail after an unescaped '@').
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from rota.cli.main import main

SECRET = "S3cretPassw0rd"
PARTS = ("S3cret", "Passw0rd", SECRET)


def leaks(text: str) -> list[str]:
    return [p for p in PARTS if p in text]


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize(
    "url",
    [
        f" postgresql+psycopg://rota:{SECRET}@db:5432:x/rota",  # two ports
        f"postgresql+psycopg://rota:{SECRET}@[db:5432/rota",  # a broken IPv6 bracket
        f"postgresql+psycopg://rota:{SECRET}@db:99999999999999999999/rota",
        f"postgresql+psycopg:/rota:{SECRET}@db/rota",  # one slash
        f"mysql://rota:{SECRET}@db/rota",  # another database
        f"postgresql+asyncpg://rota:{SECRET}@db/rota",  # another driver
        f"rota:{SECRET}@db/rota",  # no scheme
    ],
)
def test_a_malformed_url_never_echoes_its_password(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    for command in ("jobs", "migrate", "schedules"):
        code, output = rota(capsys, command, "--db", url)
        assert code == 2, output
        assert output.startswith("rota: ")
        assert leaks(output) == [], output
        assert "Traceback" not in output


def test_a_non_numeric_port_is_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, output = rota(capsys, "jobs", "--db", f"postgresql+psycopg://rota:{SECRET}@db:abc/rota")
    assert code == 2
    assert "the database URL (scheme 'postgresql+psycopg') cannot be parsed" in output
    assert leaks(output) == []


@pytest.mark.parametrize("command", ["jobs", "migrate", "enqueue x", "apply f.yaml", "backfill"])
def test_an_unescaped_at_sign_never_leaks_the_tail_of_the_password(
    capsys: pytest.CaptureFixture[str],
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Parsed naively, the host would be "Passw0rd@127.0.0.1": a resolver error
    # ("failed to resolve host 'Passw0rd@127.0.0.1'") would print the tail.
    url = "postgresql+psycopg://rota:S3cret@Passw0rd@127.0.0.1/rota"
    argv = command.split()
    monkeypatch.chdir(tmp_path)  # apply reads its file before it opens the database
    (tmp_path / "f.yaml").write_text("job_types:\n  w: {handler: 'm:f'}\n")
    if command == "backfill":
        argv += ["s", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"]
    code, output = rota(capsys, *argv, "--db", url)
    assert code == 2, output
    assert "must be percent-encoded (@ as %40" in output
    assert leaks(output) == [], output


def run_cli(
    *argv: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *argv],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def with_password(url: str, password: str) -> str:
    return make_url(url).set(password=password).render_as_string(hide_password=False)


def test_surrounding_whitespace_in_the_environment_url_is_dropped(db_url: str) -> None:
    """A URL from a Kubernetes secret made from a file ends with a newline."""
    done = run_cli("jobs", env={"ROTA_DATABASE_URL": f" {db_url}\r\n\t"})
    assert (done.returncode, done.stderr) == (0, "")
    assert "no jobs" in done.stdout or done.stdout.startswith("JOB")


def test_no_password_in_any_output_of_real_commands(fresh_pg_url: str, tmp_path: Path) -> None:
    """Real connection attempts: a password the server ignores (trust), a host that does
    not resolve, a port nobody listens on; commands that fail early and long-running ones."""
    db_url = fresh_pg_url
    schedule = tmp_path / "f.yaml"
    schedule.write_text("job_types:\n  w:\n    handler: m:f\nschedules: {}\n")
    urls = {
        "wrong password, reachable server": with_password(db_url, SECRET),
        "unresolvable host": f"postgresql+psycopg://rota:{SECRET}@no-such-host.invalid/rota",
        "closed port": f"postgresql+psycopg://rota:{SECRET}@127.0.0.1:1/rota",
    }
    commands = [
        ["apply", str(schedule)],
        ["enqueue", "w"],
        ["scheduler", "--config", str(schedule)],
    ]
    for what, url in urls.items():
        for argv in commands:
            if argv[0] == "scheduler" and what.startswith("wrong"):
                continue  # it would run until stopped; the failing ones exit at once
            done = run_cli(*argv, env={"ROTA_DATABASE_URL": url})
            output = done.stdout + done.stderr
            assert leaks(output) == [], (what, argv, output)
            assert "Traceback" not in output, (what, argv, output)
            expected = (0,) if what.startswith("wrong") else (1,)
            assert done.returncode in expected, (what, argv, output)


def test_a_password_in_the_query_string_is_never_shown(fresh_pg_url: str) -> None:
    """libpq takes the password as a query parameter too (``?password=``), and so does
    a multi-host URL: ``rota migrate`` prints the URL it worked on, ``rota run`` logs it."""
    from rota.core.database import display_url, scrub

    base = make_url(fresh_pg_url)
    single = f"{fresh_pg_url}?password={SECRET}"
    multi = (
        f"postgresql+psycopg://{base.username}@/{base.database}"
        f"?host={base.host}:{base.port},127.0.0.1:1&password={SECRET}"
        "&target_session_attrs=read-write"
    )
    for url in (single, multi):
        assert leaks(display_url(url)) == [], display_url(url)
        assert leaks(scrub(f"failed: {url}", url)) == []
        done = run_cli("migrate", env={"ROTA_DATABASE_URL": url})
        assert done.returncode == 0, done.stderr
        assert leaks(done.stdout + done.stderr) == [], done.stdout + done.stderr


def test_an_autocommit_connection_keeps_what_it_writes(engine: Engine) -> None:
    """SQLite's engine begins every transaction itself (BEGIN IMMEDIATE), but
    SQLAlchemy never commits an AUTOCOMMIT connection: it must not begin one."""
    autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
    with autocommit.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE kept (n integer)")
        conn.exec_driver_sql("INSERT INTO kept VALUES (1)")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM kept").scalar_one() == 1
