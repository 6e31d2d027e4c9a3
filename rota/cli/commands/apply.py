"""``rota apply FILE [--dry-run] [--detailed-exitcode]``: make the ``schedules`` table match a file.

Every changed field of a schedule or job type is printed with its old and new
value. ``--detailed-exitcode`` (for CI): exit 3 when there are changes (pending
in a dry run, applied otherwise), 0 when there are none; 2 and 1 keep their
meaning (bad input, runtime failure).

``--dry-run --simulate D [--from ISO] [--json]`` also lists, for every added,
changed, revived or removed schedule, the firings the change adds (``+``) and
removes (``-``) over ``(from, from + D]`` (``--from`` defaults to the apply
instant, the database clock), each in UTC and in the schedule's time zone with
its DST note as ``rota preview`` shows it; a jittered firing is shown at the
instant it runs, its occurrence and jitter after it (``rota.scheduler.simulate``).
More than 100,000 listed firings is refused (exit 2).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta
from typing import Any

from rota.cli.commands.preview import occurrence_json, occurrence_line
from rota.cli.common import EXIT_OK, UserError, add_db_option, open_database
from rota.core.durations import DurationError, format_duration, parse_duration
from rota.core.timefmt import as_utc, parse_instant, utc_key
from rota.scheduler.apply import ApplyResult, apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_file
from rota.scheduler.simulate import (
    FiringChange,
    ScheduleSimulation,
    Simulation,
    SimulationTooLarge,
    changes_of,
    simulate,
)

EXIT_CHANGES = 3


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "apply",
        help="make the schedules table match a schedule file",
        description=(
            "Validate FILE, then in one transaction store its job types and make the "
            "schedules table match it: added, changed (a new rule starts from its next "
            "occurrence; each changed field shown old -> new), removed (kept, marked "
            "removed, no longer fires)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the schedule file (YAML)")
    p.add_argument("--dry-run", action="store_true", help="print the changes, apply nothing")
    p.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help=f"exit {EXIT_CHANGES} when there are changes (pending or applied), 0 when none",
    )
    p.add_argument(
        "--simulate",
        metavar="D",
        help="with --dry-run: list the firings the changes add (+) and remove (-) over "
        "the next D (like 30d)",
    )
    p.add_argument(
        "--from",
        dest="start",
        metavar="ISO",
        help="--simulate from this instant (default: now; no offset means UTC)",
    )
    p.add_argument("--json", action="store_true", help="--simulate: print one JSON object")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    window = _simulate_options(args)
    loaded = load_schedule_file(args.file)
    with open_database(args) as engine:
        result = apply_schedule_file(engine, loaded, dry_run=args.dry_run)
    if window is not None:
        duration, start = window
        start = result.clock if start is None else start
        assert start is not None  # an apply always reads the clock
        try:
            sim = simulate(changes_of(result, loaded.schedules), start, start + duration)
        except SimulationTooLarge as exc:
            raise UserError(
                f"--simulate {format_duration(duration)}: {exc}; simulate a shorter window"
            ) from None
        print(_json(result, sim, duration) if args.json else _text(result, sim, duration))
    else:
        print(result.render())
    if args.detailed_exitcode and result.has_changes:
        return EXIT_CHANGES
    return EXIT_OK


def _simulate_options(args: argparse.Namespace) -> tuple[timedelta, datetime | None] | None:
    """``--simulate``'s window, checked before anything is read; None without it."""
    if args.simulate is None:
        for flag, given in (("--from", args.start is not None), ("--json", args.json)):
            if given:
                raise UserError(f"{flag} goes with --dry-run --simulate D")
        return None
    if not args.dry_run:
        raise UserError("--simulate needs --dry-run: a simulation applies nothing")
    try:
        duration = parse_duration(args.simulate)
    except DurationError as exc:
        raise UserError(f"--simulate: {exc}") from None
    if duration <= timedelta(0):
        raise UserError(f"--simulate: the window must be longer than 0s, got {args.simulate!r}")
    try:
        start = parse_instant(args.start) if args.start is not None else None
    except ValueError as exc:
        raise UserError(f"--from: {exc}") from None
    return duration, start


def _text(result: ApplyResult, sim: Simulation, duration: timedelta) -> str:
    lines = [
        result.render(),
        f"firings over {format_duration(duration)}, after {utc_key(sim.start)} "
        f"up to {utc_key(sim.end)}:",
    ]
    for s in sim.schedules:
        # Unindented, so a `+ instant` / `- instant` line reads the same to grep
        # as to a person; the schedule's count line above them names it.
        lines.append(f"{s.name} ({_status(s)}): {s.added} added, {s.removed} removed")
        lines += [_firing_line(c) for c in s.firings]
    lines.append(f"{sim.added} firings added, {sim.removed} removed (dry run: nothing applied)")
    return "\n".join(lines)


def _status(s: ScheduleSimulation) -> str:
    return s.change + (", paused: fires only once resumed" if s.paused else "")


def _firing_line(c: FiringChange) -> str:
    """As ``rota preview`` shows the occurrence; a jittered one at the instant it runs."""
    occ, runs = c.firing.occurrence, c.firing.run_after
    if runs == occ.instant:
        return f"{c.sign} {occurrence_line(occ)}"
    local = runs.astimezone(occ.local.tzinfo).isoformat(timespec="milliseconds")
    jitter = f"occurrence {utc_key(occ.instant)} + jitter {format_duration(runs - occ.instant)}"
    note = f"; {occ.note}" if occ.note else ""
    return f"{c.sign} {_instant_ms(runs)}  {local:<29}  ({jitter}{note})"


def _json(result: ApplyResult, sim: Simulation, duration: timedelta) -> str:
    doc = {
        "dry_run": True,
        "from": utc_key(sim.start),
        "to": utc_key(sim.end),
        "duration": format_duration(duration),
        "added": sim.added,
        "removed": sim.removed,
        "schedules": [
            {
                "name": s.name,
                "change": s.change,
                "paused": s.paused,
                "added": s.added,
                "removed": s.removed,
                "firings": [
                    {
                        "change": c.sign,
                        **occurrence_json(c.firing.occurrence),
                        "run_after": _instant_ms(c.firing.run_after),
                    }
                    for c in s.firings
                ],
            }
            for s in sim.schedules
        ],
        "unchanged": result.unchanged,
    }
    return json.dumps(doc, indent=2)


def _instant_ms(instant: datetime) -> str:
    u = as_utc(instant)
    return f"{utc_key(u)[:-1]}.{u.microsecond // 1000:03d}Z"
