"""Helpers of the rule engine tests: build a spec, walk its rule from an injected instant,
and the references rota is compared with (cronsim for cron, dateutil for RRULE)."""

from __future__ import annotations

from datetime import datetime
from itertools import islice
from typing import Any

from cronsim import CronSim, CronSimError
from dateutil.rrule import rrule, rrulestr

from rota.core.config import Ambiguous, DstPolicy, Nonexistent, ScheduleSpec
from rota.core.timefmt import parse_instant, utc_key
from rota.scheduler.rules import Occurrence, compile_rule
from rota.scheduler.rules.calendar import SEARCH_HORIZON
from rota.scheduler.rules.rrule_meter import OverBudget, PastHorizon, metered

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


# --- the references ----------------------------------------------------------


class ReferenceTooCostly(Exception):
    """dateutil would scan too long to find a rule's instants: no answer to compare with."""


def cronsim_instants(cron: str, after: datetime, n: int) -> list[str] | None:
    """cronsim's first ``n`` instants after ``after`` (UTC); None when it refuses the text."""
    try:
        walk = CronSim(cron, after)
    except CronSimError:
        return None
    return [utc_key(t) for t in islice(walk, n)]


def mixed_byday(text: str) -> bool:
    """Whether the RRULE's BYDAY list mixes plain and numbered weekdays."""
    body = text.rpartition("RRULE:")[2]
    byday = [p for p in body.split(";") if p.startswith("BYDAY=")]
    items = byday[0].removeprefix("BYDAY=").split(",") if byday else []
    return any(i.isalpha() for i in items) and any(not i.isalpha() for i in items)


def dateutil_instants(text: str, after: datetime, n: int) -> list[str]:
    """dateutil's first ``n`` instants after ``after`` (UTC), within rota's search horizon.

    A BYDAY list of plain and numbered weekdays is read as RFC 5545 reads it:
    the union of the rule with the plain ones and the rule with the numbered
    ones (dateutil alone intersects them; BYSETPOS and COUNT, which act on the
    union, cannot be split so). dateutil scans a rule that rarely matches up to
    the year 9999, so each walk is metered up to the horizon as rota's is: the
    meter counts and stops, it changes no instant.
    """
    naive = after.replace(tzinfo=None)
    horizon = naive + SEARCH_HORIZON
    found: set[datetime] = set()
    for part in _split_byday(text) if mixed_byday(text) else [text]:
        try:
            for t in islice(metered(_one_rrule(part), horizon).xafter(naive), n):
                if t > horizon:
                    break
                found.add(t)
        except (PastHorizon, ValueError):  # nothing more; "byxxx generates an empty set"
            pass
        except OverBudget:
            raise ReferenceTooCostly(text) from None
    return [f"{t:%Y-%m-%dT%H:%M:%S}Z" for t in sorted(found)[:n]]


def _split_byday(text: str) -> list[str]:
    """A mixed BYDAY list's rule as two rules: plain weekdays, and numbered ones."""
    head, _, body = text.rpartition("RRULE:")
    parts = body.split(";")
    (byday,) = [p for p in parts if p.startswith("BYDAY=")]
    items = byday.removeprefix("BYDAY=").split(",")
    groups = ([i for i in items if i.isalpha()], [i for i in items if not i.isalpha()])
    return [
        f"{head}RRULE:" + ";".join(p if p != byday else f"BYDAY={','.join(group)}" for p in parts)
        for group in groups
    ]


def _one_rrule(text: str) -> rrule:
    parsed = rrulestr(text)
    assert isinstance(parsed, rrule)  # one RRULE line
    return parsed
