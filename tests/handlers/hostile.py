"""Handlers that misbehave on purpose; the executor tests run them (in-process and
from ``rota executor`` subprocesses) to check that every one reaches an outcome.

Each is named for what it does. None of them is an example to follow.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, NoReturn

from rota.executor import AmbiguousError, PermanentError, RetryableError

TEN_MB = 10 * 1024 * 1024


# -- what they raise ---------------------------------------------------------------


def raise_system_exit(ctx: Any) -> NoReturn:
    raise SystemExit(3)


def raise_keyboard_interrupt(ctx: Any) -> NoReturn:
    raise KeyboardInterrupt


def raise_generator_exit(ctx: Any) -> NoReturn:
    raise GeneratorExit


class _StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


class _StrNotText(Exception):
    def __str__(self) -> Any:  # deliberately wrong: returns an int
        return 42


def raise_str_raises(ctx: Any) -> NoReturn:
    raise _StrRaises()


def raise_str_not_text(ctx: Any) -> NoReturn:
    raise _StrNotText()


def raise_huge_message(ctx: Any) -> NoReturn:
    raise ValueError("M" * TEN_MB)


def raise_lone_surrogate(ctx: Any) -> NoReturn:
    raise ValueError("bad \udc80 text")


def raise_nul_message(ctx: Any) -> NoReturn:
    raise ValueError("before\x00after")


def raise_memory_error(ctx: Any) -> NoReturn:
    raise MemoryError


def raise_recursion_error(ctx: Any) -> None:
    def down(n: int) -> int:
        return down(n + 1) + 1

    down(0)


def raise_exception_group(ctx: Any) -> NoReturn:
    raise ExceptionGroup("several things failed", [ValueError("one"), KeyError("two")])


def raise_long_code(ctx: Any) -> NoReturn:
    raise RetryableError("X" * 250)


def raise_nul_code(ctx: Any) -> NoReturn:
    raise PermanentError("BAD\x00CODE", "a code with a NUL")


def raise_non_text_code(ctx: Any) -> NoReturn:
    raise RetryableError(12345)  # type: ignore[arg-type]  # hostile on purpose


def raise_empty_code(ctx: Any) -> NoReturn:
    raise AmbiguousError("")


# -- what they return --------------------------------------------------------------


def return_huge_string(ctx: Any) -> str:
    return "R" * TEN_MB


def return_nul_string(ctx: Any) -> str:
    return "s3://bucket/\x00key"


def return_a_dict(ctx: Any) -> dict[str, int]:
    return {"rows": 3}


def return_true(ctx: Any) -> bool:
    return True


# -- what they report --------------------------------------------------------------


def progress_long_stage(ctx: Any) -> None:
    """Report a stage longer than its column, then wait until the test says stop."""
    ctx.progress(stage="S" * 250, done=1, total=2)
    _wait_for_file(ctx)


def wait_for_file(ctx: Any) -> None:
    """Report ordinary progress and wait until the test says stop."""
    ctx.progress(stage="WAITING", done=0, total=1)
    _wait_for_file(ctx)


def progress_wrong_type(ctx: Any) -> None:
    ctx.progress(done="three")


def _wait_for_file(ctx: Any) -> None:
    import os
    import time

    path = ctx.args["until"]
    while not os.path.exists(path):
        ctx.checkpoint()
        time.sleep(0.02)


# -- async ones --------------------------------------------------------------------


async def async_raise_system_exit(ctx: Any) -> None:
    await asyncio.sleep(0)
    raise SystemExit(1)


async def async_return_huge_string(ctx: Any) -> str:
    await asyncio.sleep(0)
    return "R" * TEN_MB


def sync_returning_a_coroutine(ctx: Any) -> Any:
    """A plain function that returns an awaitable: the executor awaits it."""

    async def later() -> str:
        await asyncio.sleep(0)
        return f"s3://results/{ctx.job_id}"

    return later()


def thread_count(ctx: Any) -> str:
    return str(threading.active_count())


def recursion_limit(ctx: Any) -> str:
    return str(sys.getrecursionlimit())
