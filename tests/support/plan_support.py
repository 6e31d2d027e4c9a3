"""Capturing the SQL a piece of rota sends, to ask the database how it runs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event


@contextmanager
def captured_statements(target: Any) -> Iterator[list[tuple[str, Any]]]:
    """Every (statement, parameters) sent through ``target`` (a Connection, an Engine,
    or the Engine class for every engine) while the block runs."""
    seen: list[tuple[str, Any]] = []

    def keep(_c: Any, _cur: Any, statement: str, parameters: Any, *_a: Any) -> None:
        seen.append((statement, parameters))

    event.listen(target, "before_cursor_execute", keep)
    try:
        yield seen
    finally:
        event.remove(target, "before_cursor_execute", keep)
