"""``GET /openapi.json``: FastAPI's document of the routes, completed with what the gate
and the error handlers answer.

FastAPI documents what a route declares; the answers given before a route runs
(``rota.api.auth``, ``rota.api.browser``, the NUL check of ``rota.api.problems``)
and the error bodies' media type are added here, by one rule per kind of
route, so a route added later is documented alike:

* every error (4xx, 5xx) is ``application/problem+json`` (``Problem``);
* every operation: 421 (a Host this server does not answer), 422 (a value that
  cannot be valid: a NUL in the path or query), 503 (the database is
  unavailable; not ``/healthz``, which does not read it);
* every operation but ``/healthz`` and ``/readyz``: 401 (no or a wrong token)
  and 403 (a role that may not), under the ``bearer`` security scheme;
* a path with a parameter: 404;
* a POST: 400 (not JSON), 403 (another origin), 413 (too large), 415 (not
  typed JSON), 422 (values refused);
* ``/metrics`` answers the Prometheus text format.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from rota.api.auth import OPEN_PATHS
from rota.api.problems import PROBLEM_JSON

PROMETHEUS_PATH = "/metrics"
PROMETHEUS_MEDIA = "text/plain"

PROBLEM_CONTENT = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An error, as RFC 9457 has it; some carry more members (errors, job_type...)",
    "properties": {
        "type": {"type": "string", "description": "a stable URN to match on"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
    },
    "required": ["type", "title", "status"],
    "additionalProperties": True,
}

EVERY_OPERATION = {
    "421": "the Host header names a server this one does not answer for",
    "422": "a value that cannot be valid (a NUL character in the path or the query string, "
    "a bad parameter)",
    "503": "the database is unavailable; see Retry-After",
}
BEHIND_THE_TOKEN = {
    "401": "no token, or not one of this server's (WWW-Authenticate: Bearer)",
    "403": "the token's role may not do this",
}
WITH_A_PATH_PARAMETER = {"404": "nothing has that name or id"}
POSTS = {
    "400": "the body is not JSON",
    "403": "the token's role may not do this, or the request comes from another origin",
    "413": "the body is too large",
    "415": "the body is not typed application/json",
    "422": "a value that cannot be kept or is refused",
}


def documented(api: FastAPI) -> dict[str, Any]:
    """The document, made once per app."""
    if api.openapi_schema is None:
        doc = get_openapi(
            title=api.title,
            version=api.version,
            description=api.description,
            routes=api.routes,
        )
        complete(doc)
        api.openapi_schema = doc
    return api.openapi_schema


def complete(doc: dict[str, Any]) -> None:
    """Add the answers of the gate and the error handlers to every operation of ``doc``."""
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "ROTA_API_TOKEN, or a token whose sha256 is in ROTA_API_TOKENS_FILE",
        }
    }
    doc["security"] = [{"bearer": []}]
    for path, operations in doc.get("paths", {}).items():
        for method, operation in operations.items():
            _complete_operation(path, method.upper(), operation)


def _complete_operation(path: str, method: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    added = dict(EVERY_OPERATION)
    if path == "/healthz":
        added.pop("503")
    if path in OPEN_PATHS:
        operation["security"] = [{}, {"bearer": []}]  # a token is neither needed nor refused
    else:
        added.update(BEHIND_THE_TOKEN)
    if "{" in path:
        added.update(WITH_A_PATH_PARAMETER)
    if method == "POST":
        added.update(POSTS)
    for status, description in added.items():
        responses.setdefault(status, {"description": description})
    for status, response in responses.items():
        if status[0] in "45":
            response["content"] = {
                PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}
            }
    if path == PROMETHEUS_PATH and "200" in responses:
        responses["200"]["content"] = {PROMETHEUS_MEDIA: {"schema": {"type": "string"}}}
