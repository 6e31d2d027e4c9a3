"""Hostile handlers, on both backends: every one reaches an outcome with a readable,
bounded error; the jobs run beside them are unaffected; the executor keeps working.

The handlers (``tests.handlers.hostile``) raise what should never be raised
(SystemExit, KeyboardInterrupt, GeneratorExit, MemoryError, RecursionError, an
ExceptionGroup, exceptions whose ``str()`` fails), say too much (10 MB
messages, codes longer than their column, NUL, lone surrogates), return what is
not a result reference, or are ``command:`` handlers writing non-UTF-8, NUL or
10 MB, or naming a missing program or a directory. They all run in ONE executor
at once, with bystander jobs whose short leases must keep being renewed.
A shorter set also runs through real ``rota executor`` processes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.core.config import JobTypeSpec
from rota.core.storable import ERROR_CODE_MAX, ERROR_DETAIL_MAX
from tests.support.executor_support import (
    REPO_ROOT,
    SLOW_RETRY,
    add_jobs,
    attempt_rows,
    job_row,
    job_type,
    running_executors,
    states,
    store_types,
    subprocess_env,
    wait_for,
)

H = "tests.handlers.hostile"
TEN_MB = 10 * 1024 * 1024


@dataclass(frozen=True)
class Case:
    """One hostile job type and what its job must end with."""

    name: str
    spec: JobTypeSpec
    state: str
    code: Callable[[str], bool]
    detail: Callable[[str], bool] = lambda d: True


def _py(name: str, handler: str, state: str, code: str, **checks: Callable[[str], bool]) -> Case:
    spec = job_type(name, handler=f"{H}:{handler}", backoff=SLOW_RETRY)
    return Case(name, spec, state, lambda c: c == code, **checks)


def _cmd(name: str, argv: tuple[str, ...], code: str, **checks: Callable[[str], bool]) -> Case:
    spec = JobTypeSpec(name=name, command=argv, backoff=SLOW_RETRY)
    return Case(name, spec, "RETRY_WAIT", lambda c: c == code, **checks)


def _sh(script: str) -> tuple[str, ...]:
    return ("sh", "-c", script)


RETRY, FAILED = "RETRY_WAIT", "FAILED"
CASES = [
    _py("system_exit", "raise_system_exit", RETRY, "SystemExit"),
    _py("keyboard_interrupt", "raise_keyboard_interrupt", RETRY, "KeyboardInterrupt"),
    _py("generator_exit", "raise_generator_exit", RETRY, "GeneratorExit"),
    _py("str_raises", "raise_str_raises", RETRY, "_StrRaises"),
    _py("str_not_text", "raise_str_not_text", RETRY, "_StrNotText"),
    _py(
        "huge_message", "raise_huge_message", RETRY, "ValueError",
        # The middle cut keeps the frames (where) and the end of the message.
        detail=lambda d: "raise_huge_message" in d and "[cut " in d and d.endswith("MMMM"),
    ),
    _py("surrogate", "raise_lone_surrogate", RETRY, "ValueError", detail=lambda d: "\ufffd" in d),
    _py("nul_message", "raise_nul_message", RETRY, "ValueError", detail=lambda d: "\\x00" in d),
    _py("memory_error", "raise_memory_error", RETRY, "MemoryError"),
    _py("recursion", "raise_recursion_error", RETRY, "RecursionError"),
    _py(
        "exception_group", "raise_exception_group", RETRY, "ExceptionGroup",
        detail=lambda d: "several things failed" in d and "KeyError" in d,
    ),
    Case(
        "long_code",
        job_type("long_code", handler=f"{H}:raise_long_code", backoff=SLOW_RETRY),
        RETRY,
        lambda c: c.startswith("XXXX") and c.endswith("chars]"),
    ),
    _py("nul_code", "raise_nul_code", FAILED, "BAD\\x00CODE"),
    _py("non_text_code", "raise_non_text_code", RETRY, "12345"),
    _py("empty_code", "raise_empty_code", RETRY, "AmbiguousError"),
    _py(
        "huge_result", "return_huge_string", FAILED, "RESULT_INVALID",
        detail=lambda d: f"{TEN_MB:,} characters" in d,
    ),
    _py("nul_result", "return_nul_string", FAILED, "RESULT_INVALID", detail=lambda d: "NUL" in d),
    _py("dict_result", "return_a_dict", FAILED, "RESULT_INVALID", detail=lambda d: "dict" in d),
    _py("true_result", "return_true", FAILED, "RESULT_INVALID", detail=lambda d: "bool" in d),
    _py("bad_progress", "progress_wrong_type", RETRY, "TypeError"),
    _py("async_exit", "async_raise_system_exit", RETRY, "SystemExit"),
    _py("async_huge_result", "async_return_huge_string", FAILED, "RESULT_INVALID"),
    _cmd(
        "cmd_not_utf8", _sh("printf '\\377\\376bad' >&2; printf '\\377' ; exit 1"), "EXIT_1",
        detail=lambda d: "\ufffd" in d and "bad" in d,
    ),
    _cmd(
        "cmd_nul", _sh("printf 'a\\000b' >&2; printf 'c\\000d'; exit 2"), "EXIT_2",
        detail=lambda d: "a\\x00b" in d,
    ),
    _cmd(
        "cmd_10mb_stderr", _sh("head -c 10485760 /dev/zero | tr '\\000' E >&2; exit 3"), "EXIT_3",
        detail=lambda d: d.endswith("EEEE"),
    ),
    _cmd("cmd_10mb_stdout", _sh("head -c 10485760 /dev/zero; exit 4"), "EXIT_4"),
    _cmd(
        "cmd_missing", ("/nonexistent/rota-test-program",), "FileNotFoundError",
        detail=lambda d: "/nonexistent/rota-test-program" in d,
    ),
    _cmd("cmd_directory", ("/",), "PermissionError"),
]  # fmt: skip


def _bystander() -> JobTypeSpec:
    """Runs 8 s on a 6 s lease: it needs its renewals while the hostile jobs end.

    A renewal comes every third of the lease, so the lease expires only if two
    renewals in a row are missed, never from one slow tick of a busy machine."""
    handler = "tests.handlers.plain:finish_after"
    return job_type("bystander", handler=handler, lease=timedelta(seconds=6))


def _all_ended(engine: Engine, ids: list[uuid.UUID]) -> bool:
    """Every job has an outcome: none queued or running any more."""
    return not {"QUEUED", "RUNNING"} & set(states(engine, ids).values())


def _check(engine: Engine, cases: list[Case], ids: dict[str, uuid.UUID]) -> list[str]:
    wrong = []
    for case in cases:
        row = job_row(engine, ids[case.name])
        code, detail = row["last_error_code"] or "", row["last_error_detail"] or ""
        problems = []
        if row["state"] != case.state:
            problems.append(f"state {row['state']}")
        if not case.code(code) or len(code) > ERROR_CODE_MAX:
            problems.append(f"code {code[:80]!r}")
        if not detail or len(detail) > ERROR_DETAIL_MAX or not case.detail(detail):
            problems.append(f"detail ({len(detail)} chars) {detail[-200:]!r}")
        if "\x00" in code + detail:
            problems.append("a NUL stored")
        (att,) = attempt_rows(engine, ids[case.name])
        if att["ended_at"] is None or att["error_code"] != row["last_error_code"]:
            problems.append(f"attempt row {att['outcome']} {att['error_code']!r}")
        if problems:
            wrong.append(f"{case.name}: {'; '.join(problems)}")
    return wrong


def test_every_hostile_handler_reaches_a_readable_outcome_and_harms_no_bystander(
    engine: Engine,
) -> None:
    bystander = _bystander()
    store_types(engine, bystander, *(c.spec for c in CASES))
    ids = {c.name: add_jobs(engine, c.spec)[0] for c in CASES}
    by_ids = add_jobs(engine, bystander, 4, args={"seconds": 8.0})
    with running_executors(engine) as start:
        start(concurrency=len(CASES) + 4)
        wait_for(lambda: _all_ended(engine, [*ids.values(), *by_ids]), timeout=60, what="outcomes")
        assert _check(engine, CASES, ids) == []
        for job_id in by_ids:  # renewed all along: no LEASE_EXPIRED, one attempt
            row = job_row(engine, job_id)
            assert (row["state"], row["attempt_count"], row["last_error_code"]) == (
                "SUCCEEDED", 1, None
            )  # fmt: skip
        # The executor keeps working afterwards.
        (later,) = add_jobs(engine, bystander, args={"seconds": 0.1})
        wait_for(lambda: job_row(engine, later)["state"] == "SUCCEEDED", what="a later job")


PROCESS_CASES = [
    c
    for c in CASES
    if c.name
    in {
        "system_exit",
        "keyboard_interrupt",
        "huge_message",
        "nul_code",
        "long_code",
        "huge_result",
        "async_exit",
        "cmd_nul",
        "cmd_missing",
    }
]


@pytest.mark.slow
def test_hostile_handlers_in_a_real_executor_process(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    bystander = _bystander()
    store_types(engine, bystander, *(c.spec for c in PROCESS_CASES))
    ids = {c.name: add_jobs(engine, c.spec)[0] for c in PROCESS_CASES}
    by_ids = add_jobs(engine, bystander, 3, args={"seconds": 4.0})
    log_path = tmp_path / "executor.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rota.cli.main", "executor", "--concurrency", "16",
             "--poll-interval", "0.1", "--log-level", "WARNING"],
            cwd=REPO_ROOT, env=subprocess_env(db_url), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for(
                lambda: _all_ended(engine, [*ids.values(), *by_ids]), timeout=60, what="outcomes"
            )
            assert _check(engine, PROCESS_CASES, ids) == []
            assert set(states(engine, by_ids).values()) == {"SUCCEEDED"}
            (later,) = add_jobs(engine, bystander, args={"seconds": 0.1})
            wait_for(lambda: job_row(engine, later)["state"] == "SUCCEEDED", what="a later job")
            assert proc.poll() is None  # neither SystemExit nor KeyboardInterrupt ended it
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    out = log_path.read_text(errors="replace")
    assert "Traceback" not in out
    assert "LEASE_EXPIRED" not in out and "lease_lost" not in out
