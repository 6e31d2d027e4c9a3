"""Helpers of the rule engine tests: build a spec, walk its rule from an injected instant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rota.core.config import Ambiguous, DstPolicy, Nonexistent, ScheduleSpec
from rota.core.timefmt import parse_instant, utc_key
from rota.scheduler.rules import Occurrence, compile_rule

Row = tuple[str, str, str | None, bool]

SHIFT_FIRST = DstPolicy(Nonexistent.SHIFT, Ambiguous.FIRST)
SHIFT_LAST = DstPolicy(Nonexistent.SHIFT, Ambiguous.LAST)
SHIFT_BOTH = DstPolicy(Nonexistent.SHIFT, Ambiguous.BOTH)
SKIP_FIRST = DstPolicy(Nonexistent.SKIP, Ambiguous.FIRST)
SKIP_BOTH = DstPolicy(Nonexistent.SKIP, Ambiguous.BOTH)


def spec(**kw: Any) -> ScheduleSpec:
    kw.setdefault("name", "s")
    kw.setdefault("job_type", "t")
    return ScheduleSpec(**kw)


def at(text: str) -> datetime:
    return parse_instant(text)


def row(occ: Occurrence) -> Row:
    return (utc_key(occ.instant), occ.local.isoformat(), occ.note, occ.skipped)


def walk(s: ScheduleSpec, after: str, n: int) -> list[Row]:
    """The first ``n`` occurrences strictly after ``after``, each fed back as the next ``after``."""
    rule = compile_rule(s)
    rows: list[Row] = []
    t = at(after)
    for _ in range(n):
        occ = rule.next_after(t)
        if occ is None:
            break
        rows.append(row(occ))
        t = occ.instant
    return rows


def instants(s: ScheduleSpec, after: str, n: int) -> list[str]:
    return [r[0] for r in walk(s, after, n)]
