"""The text of a schedule file, read only when it is a small regular file in UTF-8.

A schedule file comes from an operator's path, which may name anything: a
FIFO that never ends, a device that streams zeros, a directory, a file of
gigabytes. Each is refused with a ``ConfigError`` before a byte is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rota.scheduler.schedule_file.errors import ConfigError, Problem

MAX_FILE_BYTES = 10 * 1024 * 1024  # a schedule file of 20,000 schedules is about 2 MB


def read_schedule_text(path: str | Path) -> str:
    """The text of a regular file of at most ``MAX_FILE_BYTES``, in UTF-8.

    A FIFO, a device (``/dev/zero``), a directory or a larger file is refused
    without reading it: opening does not block (``O_NONBLOCK``) and the size is
    checked on the opened file before a byte is read.
    """
    name = str(path)

    def refuse(line: int, message: str) -> ConfigError:
        return ConfigError([Problem(name, line, message)])

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise refuse(1, f"cannot read the file: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise refuse(1, f"cannot read the file: it is {_file_kind(info.st_mode)}, not a file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_FILE_BYTES:
            raise refuse(1, _too_large(info.st_size))
        try:
            data = f.read(MAX_FILE_BYTES + 1)  # it may have grown since
        except OSError as exc:
            raise refuse(1, f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise refuse(1, _too_large(len(data)))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise refuse(line, f"the file is not UTF-8 text (byte {exc.start + 1})") from None


def _too_large(size: int) -> str:
    return f"the file is {size:,} bytes; a schedule file is at most {MAX_FILE_BYTES:,} bytes"


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"
