"""``rota preview [FILE] NAME``: the next fire instants of one schedule.

With a FILE, the schedule as the file declares it (no database needed);
without, the schedule as applied in the database (``rota apply`` stored it).

Each line gives the instant in UTC (the occurrence key's instant), the local
time in the schedule's zone, and what DST did to it, if anything. ``--from``
defaults to now; instants are strictly after it. ``--json`` prints a list of
``{"instant": "...Z", "local": "<ISO with offset>", "note": ... | null}``.

Wall times dropped by an explicit ``dst: {nonexistent: skip}`` are not fire
instants: they never count towards ``--count``. The text output shows each one
on a line of its own (with its date, no instant); ``--json`` leaves them out
unless ``--with-skipped`` is given, and then includes them with a note starting
``skipped:`` at the gap's transition instant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from rota.cli import bounds
from rota.cli.commands.check import print_problems
from rota.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    UserError,
    add_db_option,
    checked_arg,
    open_database,
)
from rota.core.config import ScheduleSpec
from rota.core.queries.schedules import get_schedule, read_clock, schedule_names
from rota.core.timefmt import parse_instant, utc_key
from rota.scheduler.rules import Occurrence, compile_rule, effective_dst, is_fixed_time
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.fields import close_match
from rota.scheduler.schedule_file.loader import load_schedule_file

DEFAULT_COUNT = 10
MAX_COUNT = bounds.PREVIEW_COUNT.high


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "preview",
        help="show a schedule's next fire instants (from a file, or as applied)",
        usage="rota preview [FILE] NAME [--from ISO] [--count N] [--json] [--with-skipped] "
        "[--db URL] [--schema NAME]",
    )
    p.add_argument(
        "words",
        nargs="+",
        metavar="FILE_OR_NAME",
        help="the schedule NAME in the schedule FILE (YAML; no database needed), or, "
        "without FILE, as applied in the database",
    )
    add_db_option(p)  # the file form needs no database
    p.add_argument(
        "--from",
        dest="start",
        metavar="ISO",
        help="list instants strictly after this one (default: now; no offset means UTC)",
    )
    p.add_argument(
        "--count",
        type=bounds.PREVIEW_COUNT,
        default=DEFAULT_COUNT,
        metavar="N",
        help="how many (default: 10)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument(
        "--with-skipped",
        action="store_true",
        help="--json: include wall times skipped by the DST policy",
    )
    p.set_defaults(func=run, trailing_words="words")


def run(args: argparse.Namespace) -> int:
    if len(args.words) > 2:
        raise UserError("preview takes a schedule NAME, or a FILE and a NAME")
    try:
        start = parse_instant(args.start) if args.start else None
    except ValueError as exc:
        print(f"rota preview: --from: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if len(args.words) == 1:
        stored, clock, status = _applied(args, args.words[0], start)
        show(args, stored, clock, status)
        return EXIT_OK
    args.file, args.name = args.words
    try:
        loaded = load_schedule_file(args.file)
    except ConfigError as exc:
        print_problems(exc)
        return EXIT_BAD_INPUT
    spec = loaded.schedules.get(args.name)
    if spec is None:
        names = list(loaded.schedules)
        hint = close_match(args.name, names)
        listed = ", ".join(names) or "none"
        print(
            f"rota preview: no schedule {args.name!r} in {args.file}{hint} (schedules: {listed})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    show(args, spec, start or datetime.now(UTC))
    return EXIT_OK


def _applied(
    args: argparse.Namespace, name: str, start: datetime | None
) -> tuple[ScheduleSpec, datetime, str | None]:
    """The stored definition of ``name``, the start (default: the database clock), a status."""
    name = checked_arg("NAME", name)
    with open_database(args) as engine, engine.connect() as conn:
        row = get_schedule(conn, name)
        if row is None:
            from rota.operations.schedules import UnknownSchedule  # only on this error path

            hint = (
                f"; to preview from a file, give it and a NAME: `rota preview {name} NAME`"
                if os.path.isfile(name)
                else ""
            )
            raise UserError(f"{UnknownSchedule(name, schedule_names(conn))}{hint}")
        clock = read_clock(conn) if start is None else start
    status = None
    if row["removed"]:
        status = "removed from the schedule file: it no longer fires"
    elif row["paused"]:
        status = "paused: these instants fire only once it is resumed"
    return ScheduleSpec.from_json(row["definition"]), clock, status


def show(
    args: argparse.Namespace, spec: ScheduleSpec, start: datetime, status: str | None = None
) -> None:
    occurrences = upcoming(spec, start, args.count)
    if args.json:
        shown = [o for o in occurrences if args.with_skipped or not o.skipped]
        print(json.dumps([occurrence_json(o) for o in shown], indent=2))
        return
    print(describe(spec) + (f" ({status})" if status else ""))
    for occ in occurrences:
        print(occurrence_line(occ))
    if sum(not o.skipped for o in occurrences) < args.count:
        print("(no more occurrences)")


def upcoming(spec: ScheduleSpec, start: datetime, count: int) -> list[Occurrence]:
    """The next ``count`` fire instants after ``start``, with skipped ones among them."""
    rule = compile_rule(spec)
    result: list[Occurrence] = []
    fired = 0
    occ = rule.next_after(start)
    while occ is not None:
        result.append(occ)
        fired += not occ.skipped
        if fired >= count:
            break
        occ = rule.next_after(occ.instant)
    return result


def occurrence_json(occ: Occurrence) -> dict[str, Any]:
    return {
        "instant": utc_key(occ.instant),
        "local": occ.local.isoformat(timespec="seconds"),
        "note": occ.note,
    }


def occurrence_line(occ: Occurrence) -> str:
    if occ.skipped:
        return f"{'(not run)':<20}  {occ.local.date().isoformat():<25}  {occ.note}"
    local = occ.local.isoformat(timespec="seconds")
    return f"{utc_key(occ.instant)}  {local:<25}  {occ.note or ''}".rstrip()


def describe(spec: ScheduleSpec) -> str:
    """A header: the rule, its zone, and the DST policy in force (and why)."""
    dst = effective_dst(spec)
    if dst is None:
        policy = "no DST policy (fixed interval in real time)"
    else:
        source = (
            "from the file"
            if spec.dst is not None
            else (
                "default for a fixed-time rule"
                if is_fixed_time(spec)
                else "default: follows real time"
            )
        )
        policy = (
            f"dst: nonexistent={dst.nonexistent.value}, ambiguous={dst.ambiguous.value} ({source})"
        )
    rule = " ".join(spec.rule_text.split())  # an RRULE with DTSTART spans lines
    return f"{spec.name}: {rule} in {spec.timezone}; {policy}"
