"""The handler of the built-in job type ``rota.notify``: one signed webhook POST.

The body (built when the delivery was enqueued, ``rota.producer.notify``) is
encoded the same way on every attempt, so each retry sends the same bytes,
the same ``Rota-Delivery-Id`` (this job's id) and the same signature:

    Rota-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with the secret>

The secret is read here, from the environment variable the target names, in
the executor that delivers; it is never stored, logged or put in an error.

Outcomes: a 2xx answer succeeds. A 5xx answer, a timeout (the target's
``timeout``, default 10 s, for each of connecting, sending and waiting) or a connection
failure is retried (``RetryableError``, the job type's backoff). Any other
answer (4xx, and 3xx: redirects are not followed) fails the delivery at once
with the status as its error code. A missing secret variable fails it with
``NOTIFY_SECRET_MISSING``; it can be replayed once the executors have it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import ssl
from typing import Any

import httpx

from rota.core.notifications import (
    DELIVERY_HTTP_TIMEOUT,
    ENV_NAME,
    MAX_HTTP_TIMEOUT,
    url_problem,
)
from rota.core.version import __version__
from rota.executor.errors import PermanentError, RetryableError

SIGNATURE_HEADER = "Rota-Signature"
DELIVERY_ID_HEADER = "Rota-Delivery-Id"
EVENT_HEADER = "Rota-Event"


def encode_body(body: Any) -> bytes:
    """The raw bytes POSTed (and signed): compact JSON, keys sorted, UTF-8."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, raw: bytes) -> str:
    """The ``Rota-Signature`` header's value for ``raw`` under ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def deliver(ctx: Any) -> None:
    """POST this delivery's body to its target once; raise how it failed."""
    args = ctx.args
    url, env, body = args.get("url"), args.get("secret_env"), args.get("body")
    if not isinstance(url, str) or not isinstance(env, str) or not isinstance(body, dict):
        raise PermanentError("NOTIFY_BAD_ARGS", "a delivery needs url, secret_env and body")
    problem = url_problem(url, insecure=bool(args.get("insecure", False)))
    if problem is not None:
        raise PermanentError("NOTIFY_BAD_URL", f"the target's url {problem}")
    if not ENV_NAME.match(env):
        raise PermanentError("NOTIFY_BAD_ARGS", "secret_env is not an environment variable name")
    secret = os.environ.get(env)
    if not secret:
        raise PermanentError(
            "NOTIFY_SECRET_MISSING",
            f"the environment variable {env} (the secret of target {args.get('target')!r}) "
            "is not set in this executor",
        )
    raw = encode_body(body)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"rota/{__version__}",
        DELIVERY_ID_HEADER: str(ctx.job_id),
        EVENT_HEADER: str(body.get("event")),
        SIGNATURE_HEADER: signature(secret, raw),
    }
    timeout = _timeout(args.get("timeout_seconds"))
    try:
        # Streamed and closed unread: only the status matters, and a receiver's
        # huge answer is never held in memory.
        with httpx.stream(
            "POST", url, content=raw, headers=headers, timeout=timeout, verify=_tls()
        ) as answer:
            status = answer.status_code
    except httpx.TimeoutException:
        raise RetryableError("NOTIFY_TIMEOUT", f"no answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:  # refused, reset, DNS: the receiver may come back
        raise RetryableError("NOTIFY_UNREACHABLE", type(exc).__name__) from None
    if 200 <= status < 300:
        return
    if status >= 500:
        raise RetryableError(str(status), f"the receiver answered {status}")
    raise PermanentError(str(status), f"the receiver answered {status}")


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default verifying context, made once a process: building one loads the CA
    bundle, 30 to 50 ms of CPU, which every delivery paid. A context is safe to share
    between threads."""
    return httpx.create_ssl_context()


def _timeout(given: object) -> float:
    """The target's timeout in seconds (deliveries enqueued before it existed: the default)."""
    default = DELIVERY_HTTP_TIMEOUT.total_seconds()
    if isinstance(given, bool) or not isinstance(given, int | float):
        return default
    return given if 0 < given <= MAX_HTTP_TIMEOUT.total_seconds() else default
