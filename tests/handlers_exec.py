"""Handlers the executor tests run (importable by executor subprocesses)."""
from __future__ import annotations

from typing import Any


def noop(ctx: Any) -> None:
    return None
