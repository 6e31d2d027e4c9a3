"""``GET /jobs/{id}/attempts/{n}/output`` against a running server, on both backends.

In-process executors run the jobs; ``tests/processes/test_attempt_output_processes.py``
does the same with ``rota executor``, ``rota serve`` and ``rota job --output``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from rota.api.outputs import DROPPED_HEADER
from rota.api.problems import PROBLEM_JSON
from rota.core.config import JobTypeSpec
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import (
    FAST_RETRY,
    StartExecutor,
    add_jobs,
    job_type,
    state_is,
    store_types,
    wait_for,
)

COMMAND = JobTypeSpec(name="cmd", command=("sh", "-c", "echo from stdout; echo from stderr >&2"))
SAYS = job_type("says", handler="tests.handlers.output:says")
FLAKY = job_type("flaky", handler="tests.handlers.output:fails_first", backoff=FAST_RETRY)


@pytest.fixture
def api(engine: Engine) -> Iterator[httpx.Client]:
    store_types(engine, COMMAND, SAYS, FLAKY)
    with running_api(engine) as base, loopback.Client(base_url=base, timeout=10) as client:
        yield client


def ran(engine: Engine, start_executor: StartExecutor, spec: JobTypeSpec, **kw: Any) -> str:
    (job_id,) = add_jobs(engine, spec, **kw)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    return str(job_id)


def test_a_commands_output_and_a_handlers_ctx_log_lines_come_back(
    api: httpx.Client, engine: Engine, start_executor: StartExecutor
) -> None:
    command = ran(engine, start_executor, COMMAND)
    says = ran(engine, start_executor, SAYS, args={"word": "bonjour"})

    r = api.get(f"/jobs/{command}/attempts/1/output")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.text == "from stdout\nfrom stderr\n" or r.text == "from stderr\nfrom stdout\n"
    assert r.headers[DROPPED_HEADER] == "0"

    r = api.get(f"/jobs/{says}/attempts/1/output")
    assert r.status_code == 200
    assert "INFO rota.handler: ctx says bonjour\n" in r.text


def test_each_attempt_is_read_by_its_number(
    api: httpx.Client, engine: Engine, start_executor: StartExecutor
) -> None:
    job_id = ran(engine, start_executor, FLAKY)
    first = api.get(f"/jobs/{job_id}/attempts/1/output").text
    second = api.get(f"/jobs/{job_id}/attempts/2/output").text
    assert "attempt 1 speaking" in first and "attempt 2" not in first
    assert "attempt 2 speaking" in second and "attempt 1" not in second
    # The same numbering as the attempts of GET /jobs/{id}.
    attempts = api.get(f"/jobs/{job_id}").json()["attempts"]
    assert [a["outcome"] for a in attempts] == ["RETRY", "SUCCEEDED"]


# "\u0661" (ARABIC-INDIC DIGIT ONE) is a digit to str.isdigit(), not an attempt number.
HOSTILE_NUMBERS = ["0", "3", "-1", "abc", "1e3", "1.0", "99999999999999999999999", "\u0661"]


@pytest.mark.parametrize("n", HOSTILE_NUMBERS)
def test_no_such_attempt_is_a_404_problem(
    api: httpx.Client, engine: Engine, start_executor: StartExecutor, n: str
) -> None:
    job_id = ran(engine, start_executor, FLAKY)
    r = api.get(f"/jobs/{job_id}/attempts/{n}/output")
    assert r.status_code == 404, r.text
    assert r.headers["content-type"] == PROBLEM_JSON
    assert r.json()["title"] == "No such attempt"


def test_a_nul_in_the_attempt_number_is_a_422_problem(api: httpx.Client) -> None:
    """A NUL anywhere in a path is refused before any route runs (PostgreSQL cannot hold one)."""
    r = api.get(f"/jobs/{uuid.uuid4()}/attempts/%00/output")
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM_JSON


def test_no_such_job_is_a_404_problem(api: httpx.Client, engine: Engine) -> None:
    (queued,) = add_jobs(engine, COMMAND)  # no attempt yet
    for path, title in (
        (f"/jobs/{uuid.uuid4()}/attempts/1/output", "No such job"),
        ("/jobs/not-a-job/attempts/1/output", "No such job"),
        (f"/jobs/{queued}/attempts/1/output", "No such attempt"),
    ):
        r = api.get(path)
        assert r.status_code == 404, (path, r.text)
        assert r.headers["content-type"] == PROBLEM_JSON
        assert r.json()["title"] == title


def test_the_openapi_document_describes_it(api: httpx.Client) -> None:
    doc = api.get("/openapi.json").json()
    op = doc["paths"]["/jobs/{job_id}/attempts/{n}/output"]["get"]
    assert "text/plain" in op["responses"]["200"]["content"]
    assert DROPPED_HEADER in op["responses"]["200"]["headers"]
    assert PROBLEM_JSON in op["responses"]["404"]["content"]
