"""HTTP clients for the tests, all sharing one TLS context.

httpx loads the CA bundle again for every client it builds, ``httpx.get()``
included: 30 to 50 ms of CPU each time, and the suite builds thousands of them
to speak plain HTTP to loopback. These take one context, made once. Use them
as ``httpx.Client`` and ``httpx.get`` (...); they take the same arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import httpx

TLS = httpx.create_ssl_context()


def Client(**kwargs: Any) -> httpx.Client:
    return httpx.Client(verify=TLS, **kwargs)


def _sender(method: str) -> Callable[..., httpx.Response]:
    """``httpx.<method>(url, ...)`` with the shared context."""
    return functools.partial(httpx.request, method, verify=TLS)


get = _sender("GET")
head = _sender("HEAD")
options = _sender("OPTIONS")
post = _sender("POST")
put = _sender("PUT")
delete = _sender("DELETE")
