"""Handler modules the tests name in job types and schedule files
(``"tests.handlers.<module>:<function>"``); importable by executor subprocesses and
isolated children. Not tests.
"""

import os


def append_line(path: str, line: str) -> None:
    """Append one line to ``path`` with O_APPEND: the lines several processes write
    never mix."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
