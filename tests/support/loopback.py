"""HTTP clients for the tests, all sharing one TLS context.

httpx loads the CA bundle again for every client it builds, ``httpx.get()``
included: 30 to 50 ms of CPU each time, and the suite builds thousands of them
to speak plain HTTP to loopback. These take one context, made once. Use them
as ``httpx.Client`` and ``httpx.get`` (...); they take the same arguments.
"""

from __future__ import annotations

from typing import Any

import httpx

TLS = httpx.create_ssl_context()


def Client(**kwargs: Any) -> httpx.Client:
    return httpx.Client(verify=TLS, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, verify=TLS, **kwargs)


def head(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.head(url, verify=TLS, **kwargs)


def options(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.options(url, verify=TLS, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, verify=TLS, **kwargs)


def put(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.put(url, verify=TLS, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.delete(url, verify=TLS, **kwargs)
