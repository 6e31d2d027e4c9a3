"""The OpenAPI document says what the running server answers, and every method of every
route answers as HTTP says (Allow, HEAD, OPTIONS).

Schemathesis generates requests from ``/openapi.json`` for every operation, sends
them to a running server over HTTP with a token, and checks each answer: never a
500, and a status, a media type, headers and a body the document names. The
number of examples is small and fixed (``derandomize``), so CI runs the same
requests every time in a few seconds per backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok
from sqlalchemy import Engine

from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import job_type, store_types

TOKEN = "openapi-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = 10  # per operation and generation mode: about 350 requests in all
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture
def base(engine: Engine) -> Iterator[str]:
    store_types(engine, job_type("t"))
    with running_api(engine, token=TOKEN) as url:
        yield url


@pytest.fixture
def doc(base: str) -> dict[str, Any]:
    r = loopback.get(f"{base}/openapi.json", headers=AUTH)
    assert r.status_code == 200
    document: dict[str, Any] = r.json()
    return document


def concrete(path: str) -> str:
    """A path of the document with its parameters filled in."""
    return path.replace("{job_id}", "00000000-0000-0000-0000-000000000000").replace(
        "{name}", "nightly"
    )


def test_schemathesis_finds_no_500_and_no_answer_the_document_does_not_name(base: str) -> None:
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json", headers=AUTH)
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the document itself is valid
        operations.append(result.ok())
    assert len(operations) >= 15
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def run(case: schemathesis.Case[Any]) -> None:
                case.call_and_validate(base_url=base, headers=AUTH, checks=CHECKS)

            try:
                run()
            except Unsatisfiable:  # no parameter and no body: nothing can be made invalid
                assert mode is GenerationMode.NEGATIVE, operation.label


def test_a_reason_the_document_allows_is_accepted(base: str) -> None:
    """Every ``reason`` the document allows is one the server keeps: its limits (length,
    no control character) are in the schema, not only in a 422's prose."""
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json", headers=AUTH)
    actions = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        op = result.ok()
        if (
            op.method.upper() == "POST"
            and op.path.endswith(("/cancel", "/replay", "/pause", "/resume", "/trigger"))
            and "{" in op.path  # the bulk forms refuse a body without a filter
        ):
            actions.append(op)
    assert len(actions) == 5
    for operation in actions:

        @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        @settings(
            max_examples=30,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case[Any]) -> None:
            case.call_and_validate(
                base_url=base, headers=AUTH, checks=[not_a_server_error, positive_data_acceptance]
            )

        run()


def test_errors_are_problems_and_every_operation_says_what_the_gate_answers(
    doc: dict[str, Any],
) -> None:
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearer"]["description"],
    }
    assert doc["security"] == [{"bearer": []}]
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            where = f"{method.upper()} {path}"
            for status, response in responses.items():
                if status[0] in "45":
                    assert list(response["content"]) == ["application/problem+json"], where
            expected = {"421", "422"}
            if path not in ("/healthz", "/readyz"):
                expected |= {"401", "403", "503"}
            if "{" in path:
                expected.add("404")
            if method == "post":
                expected |= {"400", "403", "413", "415", "422"}
            if (method, path) == ("post", "/jobs"):
                expected.add("429")
            assert expected <= set(responses), (where, expected - set(responses))
    assert list(doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]


def test_options_lists_every_method_of_the_path(base: str, doc: dict[str, Any]) -> None:
    for path, operations in doc["paths"].items():
        documented = {m.upper() for m in operations}
        r = loopback.options(f"{base}{concrete(path)}", headers=AUTH)
        assert r.status_code == 204, path
        allowed = {m.strip() for m in r.headers["allow"].split(",")}
        assert documented <= allowed, (path, allowed)
        assert "OPTIONS" in allowed
        assert ("HEAD" in allowed) == ("GET" in allowed), path
    allow = loopback.options(f"{base}/jobs", headers=AUTH).headers["allow"]
    assert allow == "GET, HEAD, OPTIONS, POST"


def test_a_method_no_route_takes_is_405_with_the_paths_allow(base: str) -> None:
    r = loopback.delete(f"{base}/jobs", headers=AUTH)
    assert r.status_code == 405
    assert r.headers["content-type"] == "application/problem+json"
    assert r.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    r = loopback.put(f"{base}/healthz", headers=AUTH)
    assert (r.status_code, r.headers["allow"]) == (405, "GET, HEAD, OPTIONS")


def test_a_fixed_path_belongs_to_its_own_routes_not_to_a_parameter(base: str) -> None:
    """``/jobs/cancel`` is the bulk action, not the job named 'cancel': a method it does
    not take is 405 with its own ``Allow`` (GET was a 404 "no job 'cancel'")."""
    for action in ("cancel", "replay"):
        r = loopback.get(f"{base}/jobs/{action}", headers=AUTH)
        assert r.status_code == 405, r.text
        assert r.headers["allow"] == "OPTIONS, POST"
        assert r.json()["detail"] == "GET is not one of OPTIONS, POST"
        options = loopback.options(f"{base}/jobs/{action}", headers=AUTH)
        assert options.headers["allow"] == "OPTIONS, POST"
    # A path only a parameter matches is as before: an id that is no job is a 404.
    missing = loopback.get(f"{base}/jobs/{uuid.uuid4()}", headers=AUTH)
    assert missing.status_code == 404


def test_head_answers_like_get_without_a_body(base: str, doc: dict[str, Any]) -> None:
    head = loopback.head(f"{base}/healthz")  # no token: an open path
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == "application/json"
    for path, operations in doc["paths"].items():
        if "get" not in operations:
            continue
        url = f"{base}{concrete(path)}"
        get, head = loopback.get(url, headers=AUTH), loopback.head(url, headers=AUTH)
        assert head.status_code == get.status_code, path
        assert head.content == b"", path
        assert head.headers["content-type"] == get.headers["content-type"], path
