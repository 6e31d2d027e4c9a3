"""Making values storable before they reach a statement.

Two kinds of callers, two policies:

* A producer (the Python API, ``rota enqueue``, the HTTP API) gets a clear
  ``ValueError`` naming the field and what is wrong, never a database error
  halfway through a batch: text must fit its column and hold neither NUL (which
  PostgreSQL text cannot store) nor lone surrogates (not UTF-8); ``args`` must
  be a JSON object of bounded size and depth, with finite numbers only
  (``check_text``, ``check_int``, ``check_args``).
* The executor writes what handlers said (error codes, messages, tracebacks,
  a command's stderr, progress stages). There is nobody to refuse it to, and
  the job must still get its outcome, so the value is *repaired* instead
  (``storable_text``): NUL becomes the four characters ``\\x00``, a lone
  surrogate becomes U+FFFD, and text longer than its column is cut with a
  visible marker (``…[cut 1234 chars]``). Text that is already storable is
  returned as it is, after a cheap check (no copy).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

ARGS_MAX_BYTES = 1_000_000  # "small JSON": a large payload belongs behind payload_ref
ARGS_MAX_DEPTH = 64
# A payload_ref names where the payload is (a URL, an object key), it is not the
# payload: 8 KiB holds any URL that common HTTP servers accept (their request
# lines stop at 8 KiB) and any object store key (S3: 1,024 bytes), and even in
# 4-byte UTF-8 it stays far inside the 128 KiB a ``command:`` can receive as
# ``ROTA_PAYLOAD_REF`` (``ENV_STRING_MAX``), so an accepted job can always run.
PAYLOAD_REF_MAX = 8192  # characters
BIGINT_MAX = 2**63 - 1  # the largest value of a BigInteger column (PostgreSQL bigint)
ARGS_INT_LIMIT = 10**300  # integers in args stay below this in magnitude

# Bounds of what the executor writes for a handler (columns in core.tables).
ERROR_CODE_MAX = 200  # jobs.last_error_code, job_attempts.error_code: String(200)
ERROR_DETAIL_MAX = 8000  # last_error_detail / error_detail are Text: bounded by choice
PROGRESS_STAGE_MAX = 200  # jobs.progress_stage: String(200)
RESULT_REF_MAX = 2000  # jobs.result_ref is Text: a reference, not the result itself
# job_attempt_output.output is Text: the tail an attempt keeps of what its handler wrote,
# at most this many bytes of UTF-8 (so at most this many characters).
ATTEMPT_OUTPUT_MAX_BYTES = 64 * 1024

# A ``command:`` gets its args as JSON in ``ROTA_ARGS``; Linux refuses (E2BIG) one
# environment string ("ROTA_ARGS=...", with its NUL) longer than MAX_ARG_STRLEN.
ENV_STRING_MAX = 131_072
ROTA_ARGS_MAX = ENV_STRING_MAX - len("ROTA_ARGS=") - 1

Keep = Literal["head", "tail", "middle"]

_NUL = "\x00"
_NUL_SHOWN = "\\x00"  # what repr() shows: readable, and storable everywhere


def storable_text(value: object, max_chars: int, *, keep: Keep = "head") -> str:
    """``value`` as text any backend stores in a column of ``max_chars`` characters.

    Anything that is not a ``str`` is turned into one (``str()``, or the type's
    name when ``str()`` fails or does not return text). NUL and lone surrogates
    are replaced; text longer than ``max_chars`` keeps its start
    (``keep="head"``), its end (``keep="tail"``) or both ends (``keep="middle"``,
    for tracebacks: the outer frames and the innermost one with the message)
    and says how much was cut. The result is never longer than ``max_chars``.
    """
    text = value if isinstance(value, str) else _as_text(value)
    # The common case costs a length check, an O(1) ASCII flag and one memchr.
    if len(text) <= max_chars and _NUL not in text and (text.isascii() or _is_utf8(text)):
        return text
    if _NUL in text:
        text = text.replace(_NUL, _NUL_SHOWN)
    if not text.isascii() and not _is_utf8(text):
        # Paired surrogates become the character they encode; lone ones U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if len(text) <= max_chars:
        return text
    return cut_text(text, max_chars, keep=keep)


def cut_text(text: str, max_chars: int, *, keep: Keep = "head") -> str:
    """``text`` cut to ``max_chars`` characters, the marker saying how much went."""
    if len(text) <= max_chars:
        return text
    marker = f"…[cut {len(text) - max_chars} chars]"
    # The marker takes room too: count what it really removes.
    for _ in range(2):
        room = max(0, max_chars - len(marker))
        marker = f"…[cut {len(text) - room} chars]"
    room = max(0, max_chars - len(marker))
    if room == 0:  # a column too narrow for the marker: plain cut
        return text[:max_chars]
    if keep == "tail":
        return marker + text[len(text) - room :]
    if keep == "middle":
        head = room // 2
        return text[:head] + marker + text[len(text) - (room - head) :]
    return text[:room] + marker


def _as_text(value: object) -> str:
    try:
        text = str(value)
    except Exception:  # a hostile __str__: say what it was instead
        return f"<{type(value).__name__}>"
    if not isinstance(text, str):  # a __str__ returning something else
        return f"<{type(value).__name__}>"
    return text


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(field: str, value: object, max_chars: int | None) -> str | None:
    """``value`` if it is storable text (or None); else a ValueError saying why."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if type(value) is not str:  # a subclass may lie through len, in, encode: check its text
        value = str.__str__(value)
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


def plain_mapping(value: object) -> dict[Any, Any]:
    """A JSON encoder's ``default``: any ``Mapping`` (``args`` is typed so; a
    read-only config view) goes out as its dict, anything else is refused."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(
    allow_nan=False, separators=(",", ":"), ensure_ascii=False, default=plain_mapping
)


def _flat_encoder() -> Callable[[dict[str, Any]], str]:
    """``_ENCODER.encode`` for a flat dict of plain scalars, three times as fast.

    ``JSONEncoder.encode`` builds a new C encoder on every call; producers
    encode one small dict per job, so the one made here is kept. It skips the
    check for circular references, which a dict of scalars cannot have: use it
    for nothing else. Without the C accelerator, the encoder itself.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODER.encode
    encode = make(
        None,
        _ENCODER.default,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        False,
        False,
        False,
    )
    return lambda value: "".join(encode(value, 0))


_encode_flat = _flat_encoder()
_FLAT_SCALARS = (str, int, float, bool, type(None))


def args_json(value: object) -> str | None:
    """``args`` checked as ``check_args`` does, as the JSON text to store (no decoding)."""
    if value is None:
        return None
    if type(value) is dict:
        encoded = _flat_args_json(value)
        if encoded is not None:
            return encoded
    return _args_json_checked(value)


def rota_args_env(args: object) -> str:
    """``ROTA_ARGS`` of a ``command:`` run: the args as JSON (ASCII, as always)."""
    return json.dumps(args)


def command_args_problem(args: object) -> str | None:
    """Why a ``command:`` cannot receive ``args`` in its environment, or None."""
    size = len(rota_args_env(args))  # ASCII: characters are bytes
    if size <= ROTA_ARGS_MAX:
        return None
    return (
        f"args is {size:,} bytes as ROTA_ARGS, and a command's environment variable "
        f"holds at most {ROTA_ARGS_MAX:,}: put the data behind payload_ref instead"
    )


def command_payload_ref_problem(payload_ref: str | None) -> str | None:
    """Why a ``command:`` cannot receive ``payload_ref`` as ``ROTA_PAYLOAD_REF``, or None.

    ``enqueue`` keeps every new one within ``PAYLOAD_REF_MAX``; a row written
    before that limit may hold more than an environment string can.
    """
    if payload_ref is None or len(payload_ref) <= PAYLOAD_REF_MAX:
        return None
    size = len(f"ROTA_PAYLOAD_REF={payload_ref}".encode("utf-8", "surrogatepass")) + 1
    if size <= ENV_STRING_MAX:
        return None
    return (
        f"payload_ref is {size:,} bytes as ROTA_PAYLOAD_REF, and a command's environment "
        f"variable holds at most {ENV_STRING_MAX:,}: a payload_ref is a reference, at most "
        f"{PAYLOAD_REF_MAX:,} characters"
    )


def _flat_args_json(value: dict[Any, Any]) -> str | None:
    """The common case, a small flat dict of plain scalars, checked in one pass.

    None means "not that simple, or not clearly storable": the full check
    (``_args_json_checked``) then decides, with its precise message.
    """
    for key, item in value.items():
        if type(key) is not str or type(item) not in _FLAT_SCALARS:
            return None
        if type(item) is float and not math.isfinite(item):
            return None
        if type(item) is int and not -ARGS_INT_LIMIT < item < ARGS_INT_LIMIT:
            return None
    encoded = _encode_flat(value)
    # json escapes NUL as \u0000; ensure_ascii=False keeps lone surrogates, which
    # then fail the UTF-8 check. Either sends the value to the full check.
    if "\\u0000" in encoded or len(encoded) > ARGS_MAX_BYTES // 4:
        return None
    if not encoded.isascii() and not _is_utf8(encoded):
        return None
    return encoded


def _args_json_checked(value: object) -> str | None:
    if not isinstance(value, Mapping):
        raise ValueError(f"args must be a JSON object (a mapping), got {type(value).__name__}")
    _check_json(value, 0)
    try:
        encoded = _ENCODER.encode(value)
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
        _check_json_object(value, depth)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_json(item, depth + 1)
    elif isinstance(value, str):
        check_text("an args string", value, None)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"args holds {value!r}, which JSON cannot represent")
    elif isinstance(value, int):
        if abs(value) >= ARGS_INT_LIMIT:
            raise ValueError("args holds an integer too large to store")
    elif value is not None and not isinstance(value, bool):
        raise ValueError(f"args holds a {type(value).__name__}, which is not JSON")


def _check_json_object(value: Mapping[Any, object], depth: int) -> None:
    seen: set[str] = set()
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"args keys must be strings, got {type(key).__name__}")
        text = check_text("an args key", key, None) or ""
        if text in seen:  # distinct keys (str subclasses) that are one key in JSON
            raise ValueError(f"args has the key {text[:100]!r} twice")
        seen.add(text)
        _check_json(item, depth + 1)
