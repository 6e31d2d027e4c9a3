"""Each attempt's own output: the tail of what its handler wrote, kept as it runs.

Every attempt a worker slot runs gets an ``OutputTail`` (``HeldJob.output``).
While its handler runs, that tail is the current one of the slot's context
(``capturing``), and so of every asyncio task the handler creates and every
``contextvars.copy_context().run`` it starts from there: several handlers
running at once, in threads or in tasks, each write to their own. Into it go:

* a ``command:``'s stdout and stderr, as the bytes arrive (``command``), the
  two streams in one, as a terminal shows them;
* every log record made in that context, by any logger but rota's own, once
  ``install`` has wrapped the process's log record factory: a record is kept
  where it is made, in the handler's thread or task, whatever handlers and
  formatters the process logs to. A record is made only when its logger is
  enabled for its level, so the process's log level applies;
* ``ctx.log``'s records (``JobLog``, the logger ``rota.handler``), from INFO
  up, whatever the process's log level: the executor's own log shows them as
  it shows any record.

A record is kept as one line, ``2026-12-05T21:14:34.123Z INFO name: message``,
with its traceback below it. A thread the handler starts itself does not
inherit the context, so its records are not kept (as its log lines do not
carry the job's fields: ``runtime.logcontext``).

Memory stays bounded while the tail fills: text is kept as UTF-8 chunks, the
oldest dropped once the others hold ``ATTEMPT_OUTPUT_MAX_BYTES`` (64 KiB), and
a chunk longer than that is cut first. Bytes that are not UTF-8 become U+FFFD
(each stream has its own decoder, so a character split between two reads
survives), NUL becomes ``\\x00`` and a lone surrogate U+FFFD
(``core.storable``). ``snapshot()`` gives the last 64 KiB, cut at a character
boundary, and how many bytes came before them. Nothing is added by rota: the
tail holds what the handler printed or logged, and only that.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NamedTuple

from rota.core.storable import ATTEMPT_OUTPUT_MAX_BYTES, storable_text

JOB_LOGGER = "rota.handler"  # ctx.log's logger: rota's name, the handler's words

_current: ContextVar[OutputTail | None] = ContextVar("rota_output", default=None)
_FORMATTER = logging.Formatter()
_install_lock = threading.Lock()
_installed = False

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class Output(NamedTuple):
    text: str  # at most ATTEMPT_OUTPUT_MAX_BYTES bytes of UTF-8
    dropped_bytes: int  # written before ``text``


class OutputTail:
    """The last ``limit`` bytes written to it, as UTF-8; written from any thread."""

    __slots__ = ("_chunks", "_limit", "_lock", "_size", "_written")

    def __init__(self, limit: int = ATTEMPT_OUTPUT_MAX_BYTES) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0  # bytes in _chunks
        self._written = 0  # bytes ever written
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        if not text:
            return
        dropped = 0
        if len(text) > self._limit:
            # The last ``limit`` characters hold at least ``limit`` bytes: encode no more.
            head, text = text[: -self._limit], text[-self._limit :]
            dropped = len(head) if head.isascii() else len(head.encode("utf-8", "replace"))
        data = storable_text(text, sys.maxsize).encode("utf-8")
        with self._lock:
            self._written += dropped + len(data)
            if len(data) >= self._limit:
                self._chunks.clear()
                self._size = 0
                data = data[-self._limit :]
            self._chunks.append(data)
            self._size += len(data)
            # Keep the fewest newest chunks that still hold ``limit`` bytes.
            while self._size - len(self._chunks[0]) >= self._limit:
                self._size -= len(self._chunks.popleft())

    @property
    def written(self) -> int:
        """Bytes ever written: a lease renewal sends the tail when this has grown."""
        return self._written

    def write_record(self, record: logging.LogRecord) -> None:
        self.write(record_text(record))

    def snapshot(self) -> Output | None:
        """The tail and how many bytes came before it; None if nothing was written."""
        if not self._written:  # most attempts write nothing: no lock for them
            return None
        with self._lock:
            if not self._written:
                return None
            data = b"".join(self._chunks)
            written = self._written
        if len(data) > self._limit:
            data = data[len(data) - self._limit :]
        start = 0  # a cut may have split a character: start at the next one
        while start < min(len(data), 4) and data[start] & 0xC0 == 0x80:
            start += 1
        data = data[start:]
        return Output(data.decode("utf-8", "replace"), written - len(data))


def current() -> OutputTail | None:
    """The tail of the attempt whose handler runs in this context, if any."""
    return _current.get()


class capturing:  # lower case: read as a function, in ``with capturing(tail):``
    """While inside, the records made in this context (and its tasks) go to ``tail``
    (None: to no attempt's output). A class, not ``@contextmanager``: it runs
    once per job, and a generator costs three times as much."""

    __slots__ = ("_tail", "_token")

    def __init__(self, tail: OutputTail | None) -> None:
        self._tail = tail
        self._token: Token[OutputTail | None] | None = None

    def __enter__(self) -> None:
        self._token = _current.set(self._tail)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)


def record_text(record: logging.LogRecord) -> str:
    """One record as its attempt's output keeps it: a line, then any traceback."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit the format: the format alone
        message = storable_text(record.msg, 10_000)
    when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
    text = f"{when.replace('+00:00', 'Z')} {record.levelname} {record.name}: {message}\n"
    exc_info = record.exc_info
    if isinstance(exc_info, tuple) and exc_info[0] is not None:
        text += _FORMATTER.formatException(exc_info) + "\n"
    elif record.exc_text:  # formatted elsewhere (an isolated handler's process)
        text += record.exc_text + "\n"
    if record.stack_info:
        text += record.stack_info + "\n"
    return text


def _kept(name: str) -> bool:
    """Records of every logger but rota's own (its command_output lines repeat the stream)."""
    return not (name == "rota" or name.startswith("rota.")) or name == JOB_LOGGER


def install() -> None:
    """Keep the records made in a handler's context in its attempt's output (once per process).

    Wraps the process's log record factory: called wherever a record is made,
    in the thread or task that makes it, before any handler or filter.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        logging.setLogRecordFactory(_keeping(logging.getLogRecordFactory()))
        _installed = True


def _keeping(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make_and_keep(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        tail = _current.get()
        if tail is not None and _kept(record.name):
            # The output may lose the record; the record and the handler lose nothing.
            with contextlib.suppress(Exception):
                tail.write_record(record)
        return record

    return make_and_keep


class JobLog(logging.LoggerAdapter[logging.Logger]):
    """``ctx.log``: the logger ``rota.handler``, whose records from INFO up are always
    kept in the attempt's output, and logged as the process's log level says."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger(JOB_LOGGER))

    def __call__(self, msg: object, *args: object, **kwargs: Any) -> None:
        """``ctx.log("...")`` is ``ctx.log.info("...")``."""
        kwargs["stacklevel"] = int(kwargs.get("stacklevel", 1)) + 1  # this frame too
        self.log(logging.INFO, msg, *args, **kwargs)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if self.logger.isEnabledFor(level):
            # Made and kept by the record factory; the caller's line, not this one.
            kwargs["stacklevel"] = int(kwargs.get("stacklevel", 1)) + 1
            self.logger.log(level, msg, *args, **kwargs)
            return
        tail = _current.get()
        if tail is None or level < logging.INFO:
            return
        exc_info = _exc_info(kwargs.get("exc_info"))
        tail.write_record(logging.LogRecord(JOB_LOGGER, level, "", 0, msg, args, exc_info))


def _exc_info(value: object) -> ExcInfo | None:
    """``exc_info=`` as the logging module reads it: True, an exception, or a tuple."""
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    if isinstance(value, tuple) and len(value) == 3 and value[0] is not None:
        return value  # as logging takes it
    if value:
        info = sys.exc_info()
        return None if info[0] is None else info
    return None
