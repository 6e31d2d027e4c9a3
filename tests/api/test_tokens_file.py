"""A bad ``ROTA_API_TOKENS_FILE`` stops ``rota serve`` (and ``rota run``) at start: exit 2,
``file:line: message`` for each problem, and neither a token nor a hash in the output.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from rota.cli.commands.serve import access_for
from rota.cli.common import UserError
from tests.api.surface import serve_refused
from tests.support import loopback
from tests.support.api_support import rota_cmd
from tests.support.db_support import migrated_sqlite_url
from tests.support.executor_support import subprocess_env

A = hashlib.sha256(b"alice's token").hexdigest()
B = hashlib.sha256(b"bob's token").hexdigest()
DEFAULT = "the-default-token"


def entry(name: str = "alice", role: str = "operator", digest: str = A, extra: str = "") -> str:
    return f"  - name: {name}\n    role: {role}\n    sha256: {digest}\n{extra}"


CASES = {
    "unknown top-level key": ("tokens:\n" + entry() + "token:\n  - x\n", 5, "unknown key 'token'"),
    "unknown entry key": ("tokens:\n" + entry(extra="    rol: admin\n"), 5, "unknown key 'rol'"),
    "the token itself": (
        "tokens:\n  - name: alice\n    role: admin\n    token: hunter2\n",
        4,
        "never the token",
    ),
    "bad role": ("tokens:\n" + entry(role="root"), 3, "role 'root'"),
    "role missing": ("tokens:\n  - name: alice\n    sha256: " + A + "\n", 2, "role"),
    "bad hex": ("tokens:\n" + entry(digest="zz" + A[2:]), 4, "64 hexadecimal digits"),
    "short hex": ("tokens:\n" + entry(digest=A[:40]), 4, "64 hexadecimal digits"),
    "number for a hash": ("tokens:\n" + entry(digest="1234"), 4, "64 hexadecimal digits"),
    "empty token's hash": (
        "tokens:\n" + entry(digest=hashlib.sha256(b"").hexdigest()),
        4,
        "an empty token",
    ),
    "duplicate name": (
        "tokens:\n" + entry() + entry(digest=B),
        5,
        "name 'alice' is taken (line 2)",
    ),
    "duplicate hash": (
        "tokens:\n" + entry() + entry(name="bob"),
        7,
        "the same sha256 as 'alice' (line 2)",
    ),
    "duplicate hash, case apart": (
        "tokens:\n" + entry() + entry(name="bob", digest=A.upper()),
        7,
        "the same sha256 as 'alice'",
    ),
    "the default token's hash": (
        "tokens:\n" + entry(digest=hashlib.sha256(DEFAULT.encode()).hexdigest()),
        4,
        "ROTA_API_TOKEN",
    ),
    "the default token's name": ("tokens:\n" + entry(name="default"), 2, "ROTA_API_TOKEN"),
    "bad name": ("tokens:\n" + entry(name="al ice"), 2, "name"),
    "no tokens": ("tokens: []\n", 1, "no token"),
    "empty file": ("", 1, "tokens:"),
    "not a list": ("tokens: {alice: operator}\n", 1, "a list"),
    "not yaml": ("tokens:\n  - name: [alice\n", 3, "not YAML"),
    "duplicate key": ("tokens:\n" + entry(extra="    role: admin\n"), 5, "duplicate key 'role'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_bad_tokens_file_is_refused_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Through ``access_for``, the one check ``serve`` and ``run`` make at start."""
    text, line, message = CASES[case]
    path = tmp_path / "tokens.yaml"
    path.write_text(text)
    monkeypatch.setenv("ROTA_API_TOKENS_FILE", str(path))
    monkeypatch.setenv("ROTA_API_TOKEN", DEFAULT)
    with pytest.raises(UserError) as refused:
        access_for("127.0.0.1", [])
    said = str(refused.value)
    assert f"{path}:{line}: " in said, said
    assert message in said, said
    for secret in (A, A.upper(), B, A[:40], "hunter2", DEFAULT):
        assert secret not in said, secret


def test_a_bad_tokens_file_is_refused_at_serve_start(tmp_path: Path) -> None:
    """The real ``rota serve``: exit 2, the file's line, no secret, nothing served."""
    text, line, message = CASES["the token itself"]
    path = tmp_path / "tokens.yaml"
    path.write_text(text)
    db = migrated_sqlite_url(tmp_path / "rota.db")
    env = {"ROTA_API_TOKENS_FILE": str(path), "ROTA_API_TOKEN": DEFAULT}
    r = serve_refused(db, tmp_path, env=env)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"{path}:{line}: " in r.stderr, r.stderr
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    for secret in (A, A.upper(), B, A[:40], "hunter2", DEFAULT):
        assert secret not in r.stderr + r.stdout, secret
    assert "serve_started" not in r.stderr


def test_a_missing_tokens_file_is_refused(tmp_path: Path) -> None:
    db = migrated_sqlite_url(tmp_path / "rota.db")
    missing = tmp_path / "nope.yaml"
    r = serve_refused(db, tmp_path, env={"ROTA_API_TOKENS_FILE": str(missing)})
    assert r.returncode == 2
    assert f"{missing}" in r.stderr and "ROTA_API_TOKENS_FILE" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_tokens_file_lets_serve_bind_beyond_loopback(tmp_path: Path) -> None:
    from tests.api.surface import rota_serve

    path = tmp_path / "tokens.yaml"
    path.write_text("tokens:\n" + entry(role="viewer"))
    db = migrated_sqlite_url(tmp_path / "rota.db")
    env = {"ROTA_API_TOKENS_FILE": str(path)}
    with rota_serve(db, tmp_path, "--host", "0.0.0.0", env=env) as s:
        r = loopback.get(f"{s.base}/jobs", headers={"Authorization": "Bearer alice's token"})
        assert r.status_code == 200
    assert A not in s.out.text()


def test_rota_run_refuses_a_bad_tokens_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text("tokens:\n" + entry(role="root"))
    (tmp_path / "schedules.yaml").write_text("job_types:\n  t: {handler: 'm:f'}\nschedules: {}\n")
    env = subprocess_env(f"sqlite:///{tmp_path / 'rota.db'}", ROTA_API_TOKENS_FILE=str(path))
    r = subprocess.run(
        rota_cmd("run", "--serve-port", "0"),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert f"{path}:3: " in r.stderr and "role 'root'" in r.stderr
    assert A not in r.stderr
    assert "run_started" not in r.stderr
