"""The cost of one cron instant: rota's ``next_after`` against cronsim (and croniter).

Same process, same expressions, same start: each engine walks ``COUNT``
successive instants from 2026-03-07T00:00Z (the walks of daily rules cross the
spring DST changes of New York, 03-08, and Berlin, 03-29), fed its own previous
instant. Printed per expression and zone, in microseconds per instant, with
rota's cost as a ratio of cronsim's; each figure is the best of five walks,
the engines taking turns; three runs. croniter is shown for
reference only: its day-field semantics differ from cron's (see
docs/schedule-file.md). In UTC the bench also checks that rota and cronsim give
the same instants.

The target (issue 31): rota at or under cronsim per instant, in UTC and in a DST
zone. Printed, never asserted.

Run: ``python -m bench.bench_rules`` (cronsim is in the test extra).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim

from rota.core.config import ScheduleSpec
from rota.scheduler.rules import compile_rule

EXPRESSIONS = [
    "*/15 * * * *",
    "0 2 * * *",
    "30 9 * * MON-FRI",
    "*/5 9-17 * * 1-5",
    "0 0 1 * *",
    "0 0 L * *",
    "0 12 * * 5#2",
    "0 0 13 * 5",
    "0 0 */2 * 1",
    "*/20 * * * * *",
]
ZONES = ["UTC", "Europe/Berlin", "America/New_York"]
START = datetime(2026, 3, 7, tzinfo=UTC)
COUNT = 2_000
RUNS = 3
REPEATS = 5


def rota_walk(expr: str, zone: str) -> list[datetime]:
    rule = compile_rule(ScheduleSpec(name="bench", job_type="t", cron=expr, timezone=zone))
    out: list[datetime] = []
    t = START
    for _ in range(COUNT):
        occ = rule.next_after(t)
        if occ is None:
            break
        out.append(occ.instant)
        t = occ.instant
    return out


def cronsim_walk(expr: str, zone: str) -> list[datetime]:
    it = CronSim(expr, START.astimezone(ZoneInfo(zone)))
    return [next(it) for _ in range(COUNT)]


def croniter_walk(expr: str, zone: str) -> list[datetime]:
    it = croniter(
        expr,
        START.astimezone(ZoneInfo(zone)),
        ret_type=datetime,
        second_at_beginning=len(expr.split()) == 6,
    )
    return [it.get_next(datetime) for _ in range(COUNT)]


ENGINES: dict[str, Callable[[str, str], list[datetime]]] = {
    "rota": rota_walk,
    "cronsim": cronsim_walk,
    "croniter": croniter_walk,
}


def per_instant_us(expr: str, zone: str) -> dict[str, float]:
    """Each engine's best of ``REPEATS`` walks, the engines taking turns.

    The best, not the mean: on a shared machine a walk is only ever slowed
    down by others, and turns spread that over the engines alike.
    """
    best = dict.fromkeys(ENGINES, float("inf"))
    for walk in ENGINES.values():
        walk(expr, zone)  # warm: parsing and per-expression caches are not what is measured
    for _ in range(REPEATS):
        for name, walk in ENGINES.items():
            began = time.perf_counter()
            walked = len(walk(expr, zone))
            best[name] = min(best[name], (time.perf_counter() - began) / walked * 1e6)
    return best


def same_instants(expr: str) -> bool:
    return rota_walk(expr, "UTC") == [t.astimezone(UTC) for t in cronsim_walk(expr, "UTC")]


def one_run(run: int) -> dict[str, list[float]]:
    """Per-instant figures of every expression in every zone; the ratios by zone."""
    ratios: dict[str, list[float]] = {zone: [] for zone in ZONES}
    print(f"\nrun {run}: microseconds per instant ({COUNT} instants each)")
    print(
        f"{'zone':<17} {'expression':<18} {'rota':>7} {'cronsim':>8} {'croniter':>9} "
        f"{'rota/cronsim':>13}"
    )
    for zone in ZONES:
        for expr in EXPRESSIONS:
            us = per_instant_us(expr, zone)
            ratio = us["rota"] / us["cronsim"]
            ratios[zone].append(ratio)
            print(
                f"{zone:<17} {expr:<18} {us['rota']:>7.1f} {us['cronsim']:>8.1f} "
                f"{us['croniter']:>9.1f} {ratio:>13.2f}"
            )
    return ratios


def main() -> int:
    mismatched = [e for e in EXPRESSIONS if not same_instants(e)]
    agreed = len(EXPRESSIONS) - len(mismatched)
    print(f"UTC instants equal to cronsim's: {agreed} of {len(EXPRESSIONS)}")
    for expr in mismatched:
        print(f"  differs: {expr}")
    summary = []
    for run in range(1, RUNS + 1):
        ratios = one_run(run)
        summary.append({zone: (statistics.mean(r), max(r)) for zone, r in ratios.items()})
    print("\nrota/cronsim per run (mean over expressions, worst expression):")
    for run, by_zone in enumerate(summary, 1):
        cells = "  ".join(
            f"{zone} {mean:.2f} (worst {worst:.2f})" for zone, (mean, worst) in by_zone.items()
        )
        print(f"run {run}: {cells}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
