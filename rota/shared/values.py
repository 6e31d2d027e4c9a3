"""Checking values that come from producers before they reach a statement.

A producer (the Python API, ``rota enqueue``, the HTTP API) gets a clear
``ValueError`` naming the field and what is wrong, never a database error
halfway through a batch: text must fit its column and hold neither NUL (which
PostgreSQL text cannot store) nor lone surrogates (not UTF-8); ``args`` must
be a JSON object of bounded size and depth, with finite numbers only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

ARGS_MAX_BYTES = 1_000_000  # "small JSON": a large payload belongs behind payload_ref
ARGS_MAX_DEPTH = 64


def check_text(field: str, value: object, max_chars: int | None) -> str | None:
    """``value`` if it is storable text (or None); else a ValueError saying why."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise ValueError(f"{field} is at most {max_chars} characters, got {len(value)}")
    if "\x00" in value:
        raise ValueError(f"{field} holds a NUL character, which cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} is not valid Unicode (a lone surrogate)") from None
    return value


def check_int(field: str, value: object, lo: int, hi: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{field} must be between {lo} and {hi}, got {value}")
    return value


def check_args(value: object) -> dict[str, Any] | None:
    """``args`` as a plain dict that round-trips through JSON, or a ValueError."""
    encoded = args_json(value)
    if encoded is None:
        return None
    plain: dict[str, Any] = json.loads(encoded)
    return plain


def args_json(value: object) -> str | None:
    """``args`` checked as ``check_args`` does, as the JSON text to store (no decoding)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"args must be a JSON object (a mapping), got {type(value).__name__}")
    _check_json(value, 0)
    try:
        encoded = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"args cannot be stored as JSON: {str(exc)[:200]}") from None
    if len(encoded.encode("utf-8", "surrogatepass")) > ARGS_MAX_BYTES:
        raise ValueError(
            f"args is larger than {ARGS_MAX_BYTES:,} bytes as JSON: put the data behind "
            "payload_ref instead"
        )
    return encoded


def _check_json(value: object, depth: int) -> None:
    if depth > ARGS_MAX_DEPTH:
        raise ValueError(f"args is nested deeper than {ARGS_MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"args keys must be strings, got {type(key).__name__}")
            check_text("an args key", key, None)
            _check_json(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_json(item, depth + 1)
    elif isinstance(value, str):
        check_text("an args string", value, None)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"args holds {value!r}, which JSON cannot represent")
    elif isinstance(value, int):
        if abs(value) >= 10**300:
            raise ValueError("args holds an integer too large to store")
    elif value is not None and not isinstance(value, bool):
        raise ValueError(f"args holds a {type(value).__name__}, which is not JSON")
