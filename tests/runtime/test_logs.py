"""Log formats, and the job fields on every line a handler logs.

* text: one line per record, local time with its offset, ``key=value`` with
  quoting and escapes: a hostile value cannot break the line or forge a key;
* json: one object per line, UTC ``ts``, ``level``, ``logger``, ``event`` and
  the event's fields as keys;
* the job context reaches the handler's own loggers, asyncio tasks, and a
  ``command:``'s output lines;
* a real ``rota executor`` (json and text) and ``rota scheduler`` (which
  refused ``--log-level`` before).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from rota.core.config import JobTypeSpec
from rota.runtime.events import emit
from rota.runtime.logcontext import JobContextFilter, job_log_context
from rota.runtime.logformat import JsonFormatter, TextFormatter
from tests.handlers.loggers import HOSTILE
from tests.support.executor_support import (
    REPO_ROOT,
    add_jobs,
    job_row,
    job_type,
    run_in_thread,
    states,
    store_types,
    subprocess_env,
    wait_for,
)
from tests.support.logfmt_parse import parse_line

JOB = uuid.UUID("3b5d7a52-8a44-4c8e-9d59-7f0d8f1c2e10")


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO]]:
    """A logger writing to two buffers: text and json, with the job context filter."""
    logger = logging.getLogger(f"test.logs.{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    text, js = io.StringIO(), io.StringIO()
    for stream, formatter in ((text, TextFormatter()), (js, JsonFormatter())):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        handler.addFilter(JobContextFilter())
        logger.addHandler(handler)
    yield logger, text, js
    logger.handlers.clear()


def _lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


def test_hostile_values_cannot_break_a_text_line_or_forge_a_key(
    capture: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, text, _ = capture
    nasty: dict[str, Any] = {
        "space": "a b",
        "quote": 'say "hi"',
        "newline": "one\ntwo event=forged",
        "equals": "k=v",
        "backslash": "C:\\path\\",
        "empty": "",
        "nul": "a\x00b",
        "separator": "line\u2028sep\x85nel",
        "surrogate": b"\xff\xfe".decode("utf-8", "surrogateescape"),
        "emoji": "ok \N{SNOWMAN}",
    }
    emit(logger, "hostile", **nasty)
    logger.info(HOSTILE, extra={"weird key=x": "v", "ts": "fake"})
    lines = _lines(text)
    assert len(lines) == 2, lines
    _, level, name, pairs = parse_line(lines[0])
    assert (level, name) == ("INFO", logger.name)
    assert pairs == [("event", "hostile"), *nasty.items()]
    _, _, _, pairs = parse_line(lines[1])
    assert pairs == [("msg", HOSTILE), ("weird_key_x", "v"), ("ts_", "fake")]


def test_text_timestamp_has_its_offset(
    capture: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, text, _ = capture
    before = datetime.now(UTC)
    logger.warning("hello")
    ts, level, _, pairs = parse_line(_lines(text)[0])
    assert level == "WARNING" and pairs == [("msg", "hello")]
    assert abs((ts - before).total_seconds()) < 60


def test_json_lines_carry_event_fields_as_keys(
    capture: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, _, js = capture
    emit(
        logger,
        "claimed",
        logging.WARNING,
        job_id=JOB,
        attempt=2,
        ratio=math.nan,
        at=datetime(2026, 1, 1, tzinfo=UTC),
        pools=["a", "b"],
        weird=b"\xff".decode("utf-8", "surrogateescape"),
        ts="mine",
    )
    try:
        raise ValueError("boom\nline two")
    except ValueError:
        logger.exception("it failed: %s", "badly", extra={"upstream": "billing"})
    first, second = (json.loads(line) for line in _lines(js))
    assert first.pop("ts").endswith("Z")
    assert first == {
        "level": "WARNING",
        "logger": logger.name,
        "event": "claimed",
        "job_id": str(JOB),
        "attempt": 2,
        "ratio": "nan",
        "at": "2026-01-01T00:00:00+00:00",
        "pools": ["a", "b"],
        "weird": "\udcff",
        "ts_": "mine",
    }
    ts = datetime.fromisoformat(second.pop("ts"))
    assert ts.utcoffset() is not None and ts.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    exc = second.pop("exc")
    assert exc.startswith("Traceback") and "ValueError: boom\nline two" in exc
    assert second == {
        "level": "ERROR",
        "logger": logger.name,
        "event": "log",
        "message": "it failed: badly",
        "upstream": "billing",
    }


def test_a_bad_format_string_is_still_logged() -> None:
    record = logging.LogRecord("h", logging.INFO, "f.py", 1, "%d items", ("many",), None)
    assert json.loads(JsonFormatter().format(record))["message"] == "%d items ('many',)"
    assert parse_line(TextFormatter().format(record))[3] == [("msg", "%d items ('many',)")]


def test_lines_logged_inside_the_job_context_carry_the_job(
    capture: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, text, js = capture
    logger.info("before")
    with job_log_context(JOB, "report", 3, "nightly"):
        logger.info("inside")
        emit(logger, "claimed", job_id="its-own", generation=4)
    with job_log_context(JOB, "adhoc", 1, None):
        logger.info("ad hoc")
    logger.info("after")
    objs = [json.loads(line) for line in _lines(js)]
    job = {"job_id": str(JOB), "job_type": "report", "attempt": 3, "schedule": "nightly"}
    assert not set(job) & set(objs[0]) and not set(job) & set(objs[4])
    assert job.items() <= objs[1].items()
    assert objs[2]["job_id"] == "its-own" and objs[2]["job_type"] == "report"
    assert objs[3]["schedule"] is None and objs[3]["job_type"] == "adhoc"
    pairs = dict(parse_line(_lines(text)[1])[3])
    assert pairs == {"msg": "inside", **{k: str(v) for k, v in job.items()}}
    assert "schedule" not in dict(parse_line(_lines(text)[3])[3])


def test_the_job_context_reaches_tasks_on_a_shared_event_loop(
    capture: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    """An async handler scheduled from the worker slot onto the process's one loop."""
    logger, _, js = capture
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()

    async def handler() -> None:
        await asyncio.sleep(0)
        logger.info("async handler")

    try:
        with job_log_context(JOB, "async", 1, None):
            asyncio.run_coroutine_threadsafe(handler(), loop).result(timeout=5)
        asyncio.run_coroutine_threadsafe(handler(), loop).result(timeout=5)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()
    inside, outside = (json.loads(line) for line in _lines(js))
    assert inside["job_id"] == str(JOB) and inside["job_type"] == "async"
    assert "job_id" not in outside


# -- real processes --------------------------------------------------------------


def _start(db_url: str, tmp_path: Path, command: str, *options: str) -> subprocess.Popen[bytes]:
    base = tmp_path / command
    with open(f"{base}.out", "wb") as out, open(f"{base}.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "rota.cli.main", command, *options],
            cwd=REPO_ROOT,
            env=subprocess_env(db_url),
            stdout=out,
            stderr=err,
        )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(30)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_json_logs_of_a_real_executor(engine: Engine, db_url: str, tmp_path: Path) -> None:
    py = job_type("py", handler="tests.handlers.loggers:chatty")
    aio = job_type("aio", handler="tests.handlers.loggers:from_a_task")
    cmd = JobTypeSpec(
        name="cmd", command=("sh", "-c", 'echo "out line"; echo "err line" >&2; printf tail')
    )
    bad = JobTypeSpec(
        name="bad", command=("sh", "-c", "echo progress; printf 'broken\\nreally' >&2; exit 3")
    )
    store_types(engine, py, aio, cmd, bad)
    instant = datetime(2026, 3, 1, tzinfo=UTC)
    (py_id,) = add_jobs(engine, py, schedule_name="nightly", scheduled_for=instant)
    (aio_id,) = add_jobs(engine, aio)
    (cmd_id,) = add_jobs(engine, cmd)
    (bad_id,) = add_jobs(engine, bad)
    # DEBUG: the per-job claimed and succeeded lines are DEBUG (INFO has a summary).
    proc = _start(
        db_url,
        tmp_path,
        "executor",
        "--log-format",
        "json",
        "--log-level",
        "DEBUG",
        "--poll-interval",
        "0.1",
    )
    try:
        wait_for(
            lambda: set(states(engine).values()) <= {"SUCCEEDED", "RETRY_WAIT"},
            timeout=30,
            what="every job to run",
        )
    finally:
        assert _stop(proc) == 0, (tmp_path / "executor.err").read_text()
    assert (tmp_path / "executor.out").read_bytes() == b"", "command output mixed into stdout"
    lines = _json_lines(tmp_path / "executor.err")  # every line is one JSON object
    for obj in lines:
        assert {"ts", "level", "logger", "event"} <= obj.keys()
        assert obj["ts"].endswith("Z") and datetime.fromisoformat(obj["ts"]).tzinfo

    def of(job_id: uuid.UUID, **match: Any) -> list[dict[str, Any]]:
        return [o for o in lines if o.get("job_id") == str(job_id) and match.items() <= o.items()]

    started = [o for o in lines if o["event"] == "executor_started"]
    assert len(started) == 1 and started[0]["pools"] == "default"
    job = {
        "job_type": "py",
        "attempt": 1,
        "schedule": "nightly",
        "logger": "tests.handlers.loggers",
    }
    assert len(of(py_id, message="rendering page 3", event="log", level="INFO", **job)) == 1
    (slow,) = of(py_id, message="slow upstream", level="WARNING", upstream="billing")
    assert slow["ts_"] == "not-the-ts"
    assert len(of(py_id, message=HOSTILE)) == 1
    assert of(py_id, event="claimed") and of(py_id, event="succeeded")
    assert len(of(aio_id, message="inside a task", job_type="aio", attempt=1)) == 1
    assert len(of(aio_id, message="in a thread", job_type="aio")) == 1
    output = [(o["stream"], o["line"]) for o in of(cmd_id, event="command_output")]
    assert sorted(output) == [("stderr", "err line"), ("stdout", "out line"), ("stdout", "tail")]
    assert all(o["job_type"] == "cmd" for o in of(cmd_id, event="command_output"))
    assert [o["line"] for o in of(bad_id, event="command_output", stream="stderr")] == [
        "broken",
        "really",
    ]
    row = job_row(engine, bad_id)  # the stderr tail is still the error detail
    assert row["last_error_code"] == "EXIT_3"
    assert row["last_error_detail"].endswith("RetryableError: broken\nreally")


@pytest.mark.slow
def test_text_logs_of_a_real_executor_stay_one_line_per_record(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    py = job_type("py", handler="tests.handlers.loggers:chatty")
    cmd = JobTypeSpec(name="cmd", command=("printf", 'a "quoted" line\\nkey=forged x\\n'))
    store_types(engine, py, cmd)
    (py_id,) = add_jobs(engine, py)
    (cmd_id,) = add_jobs(engine, cmd)
    proc = _start(db_url, tmp_path, "executor", "--poll-interval", "0.1")
    try:
        wait_for(
            lambda: set(states(engine).values()) == {"SUCCEEDED"}, timeout=30, what="both jobs"
        )
    finally:
        assert _stop(proc) == 0, (tmp_path / "executor.err").read_text()
    parsed = [parse_line(line) for line in (tmp_path / "executor.err").read_text().splitlines()]
    records = [(name, dict(pairs)) for _, _, name, pairs in parsed]
    hostile = [p for name, p in records if p.get("msg") == HOSTILE]
    assert hostile == [{"msg": HOSTILE, "job_id": str(py_id), "job_type": "py", "attempt": "1"}]
    output = [p["line"] for name, p in records if p.get("event") == "command_output"]
    assert output == ['a "quoted" line', "key=forged x"]
    assert all(p["job_id"] == str(cmd_id) for _, p in records if p.get("event") == "command_output")
    assert not any("forged" in p for _, p in records), "no key was forged"


@pytest.mark.slow
def test_scheduler_takes_the_log_options(db_url: str, tmp_path: Path) -> None:
    proc = _start(db_url, tmp_path, "scheduler", "--log-level", "debug", "--log-format", "json")
    err = tmp_path / "scheduler.err"
    try:
        wait_for(
            lambda: "scheduler_started" in err.read_text() or proc.poll() is not None,
            timeout=30,
            what="the scheduler to start",
        )
    finally:
        assert _stop(proc) == 0, err.read_text()
    events = [o["event"] for o in _json_lines(err)]
    assert "scheduler_started" in events and "scheduler_stopped" in events


def test_bad_log_options_are_refused(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rota.cli.main import main

    assert main(["scheduler", "--db", db_url, "--log-format", "xml"]) == 2
    assert "--log-format" in capsys.readouterr().err
    monkeypatch.setenv("ROTA_LOG_FORMAT", "yaml")
    assert main(["executor", "--db", db_url]) == 2
    assert "ROTA_LOG_FORMAT" in capsys.readouterr().err


def test_hostile_command_output_is_logged_in_bounded_valid_lines(
    engine: Engine, tmp_path: Path
) -> None:
    """A 20,000-byte line, bytes that are not UTF-8, a NUL, and no final newline."""
    from rota.executor.command import LINE_MAX_BYTES

    script = tmp_path / "out.py"
    script.write_text(
        "import sys\nsys.stdout.buffer.write(b'x' * 20000 + b'\\n' + b'bad \\xff\\xfe \\x00 end')\n"
    )
    cmd = JobTypeSpec(name="cmd", command=(sys.executable, str(script)))
    store_types(engine, cmd)
    (job_id,) = add_jobs(engine, cmd)
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(JobContextFilter())
    command_log = logging.getLogger("rota.command")
    command_log.addHandler(handler)
    level = command_log.level
    command_log.setLevel(logging.INFO)
    _ex, stop, runner = run_in_thread(engine, listen=False, poll_interval=0.05, daemon=False)
    try:
        wait_for(lambda: states(engine, [job_id])[job_id] == "SUCCEEDED", what="SUCCEEDED")
    finally:
        stop.set()
        runner.join(15)
        command_log.removeHandler(handler)
        command_log.setLevel(level)
    lines = [json.loads(line) for line in _lines(buf)]
    assert len(lines) == 4  # 8192 + 8192 + 3616 bytes, then the last line
    assert all(o["job_id"] == str(job_id) and o["stream"] == "stdout" for o in lines)
    pieces = [o["line"] for o in lines]
    assert "".join(pieces[:-1]) == "x" * 20000
    assert all(len(p) <= LINE_MAX_BYTES for p in pieces)
    assert pieces[-1] == "bad \ufffd\ufffd \x00 end"
