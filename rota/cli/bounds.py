"""The range of every numeric command-line flag, enforced where the flag is parsed.

Each constant is an argparse ``type``: it accepts plain ASCII decimal text
within its range and raises ``ArgumentTypeError`` otherwise, so argparse
exits 2 with ``argument --flag: ...`` before the command does anything.
``inf``, ``nan``, digits of other scripts, negative and absurdly large values
never reach a thread pool, a sleep or the database. The README's "Command-line
numbers" table lists the same ranges.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

from rota.core.config import MAX_ATTEMPTS_MAX, PRIORITY_MAX, PRIORITY_MIN

_INT = re.compile(r"[+-]?[0-9]{1,30}", re.ASCII)
_DECIMAL = re.compile(
    r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,4})?", re.ASCII
)


@dataclass(frozen=True)
class IntRange:
    low: int
    high: int

    def __call__(self, text: str) -> int:
        value = int(text) if _INT.fullmatch(text.strip()) else None
        if value is None or not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(
                f"must be between {self} (a whole number), got {text!r}"
            )
        return value

    def __str__(self) -> str:
        return f"{self.low:,} and {self.high:,}"


@dataclass(frozen=True)
class SecondsRange:
    low: float
    high: float

    def __call__(self, text: str) -> float:
        value = float(text) if _DECIMAL.fullmatch(text.strip()) else math.nan
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise argparse.ArgumentTypeError(
                f"must be between {self} seconds (a finite number), got {text!r}"
            )
        return value

    def __str__(self) -> str:
        return f"{self.low:,g} and {self.high:,g}"


CONCURRENCY = IntRange(1, 1_000)  # threads, one per slot
PREFETCH = IntRange(0, 10_000)
TENANT_LIMIT = IntRange(1, 1_000_000)
DRAIN_TIMEOUT = SecondsRange(0.0, 86_400.0)
POLL_INTERVAL = SecondsRange(0.01, 3_600.0)
SWEEP_INTERVAL = SecondsRange(0.01, 3_600.0)
LIVENESS_INTERVAL = SecondsRange(0.01, 86_400.0)
MAX_SLEEP = SecondsRange(0.01, 3_600.0)
PORT = IntRange(0, 65_535)
SCHEDULER_BATCH = IntRange(1, 10_000)
SCHEDULER_MAX_JOBS = IntRange(1, 100_000)
JOBS_LIMIT = IntRange(1, 10_000_000)
AUDIT_LIMIT = IntRange(1, 10_000_000)
PREVIEW_COUNT = IntRange(1, 10_000)
BACKFILL_MAX = IntRange(1, 1_000_000_000)
BULK_BATCH_SIZE = IntRange(1, 100_000)
PRIORITY = IntRange(PRIORITY_MIN, PRIORITY_MAX)
MAX_ATTEMPTS = IntRange(1, MAX_ATTEMPTS_MAX)
