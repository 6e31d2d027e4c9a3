"""What a handler gave back, made storable: its result reference, or its error's code and detail.

``outcomes`` turns these into the fenced write; the child process of an
``isolation: process`` run calls them itself, before anything crosses back to
the executor. No SQLAlchemy here, so that child starts without it.
"""

from __future__ import annotations

import traceback

from rota.core.storable import ERROR_CODE_MAX, ERROR_DETAIL_MAX, RESULT_REF_MAX, storable_text
from rota.executor.errors import HandlerError, PermanentError

RESULT_INVALID = "RESULT_INVALID"


def result_ref_of(returned: object) -> str | None:
    """What a handler returned, as the job's ``result_ref``; PermanentError if it cannot be one."""
    if returned is None or returned == "":
        return None
    if not isinstance(returned, str):
        raise PermanentError(
            RESULT_INVALID,
            f"the handler returned a {type(returned).__name__}; a handler returns None, or a "
            "string saying where its result lives (e.g. s3://bucket/key)",
        )
    if len(returned) > RESULT_REF_MAX:
        raise PermanentError(
            RESULT_INVALID,
            f"the handler returned {len(returned):,} characters; a result reference holds at "
            f"most {RESULT_REF_MAX:,}: store the result elsewhere and return where it is. "
            f"It began: {storable_text(returned, 200)}",
        )
    if storable_text(returned, RESULT_REF_MAX) is not returned:
        raise PermanentError(
            RESULT_INVALID,
            "the handler returned a result reference holding NUL or a lone surrogate, which "
            f"cannot be stored: {storable_text(returned, 200)}",
        )
    return returned


def describe(exc: BaseException) -> tuple[str, str]:
    """(code, detail), both storable: the handler's code (else the class name), the traceback."""
    code = storable_text(exc.code, ERROR_CODE_MAX) if isinstance(exc, HandlerError) else ""
    if not code:
        code = storable_text(type(exc).__name__, ERROR_CODE_MAX)
    try:
        remote = exc.remote_traceback if isinstance(exc, HandlerError) else None
        detail = remote or "".join(traceback.format_exception(exc)).strip()
    except BaseException as why:  # a MemoryError, or an exception hostile to formatting
        detail = f"{code}: its traceback could not be formatted ({type(why).__name__})"
    return code, storable_text(detail, ERROR_DETAIL_MAX, keep="middle")
