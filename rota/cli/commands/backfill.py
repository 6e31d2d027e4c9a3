"""``rota backfill NAME --from ISO --to ISO``: make every occurrence in [from, to).

The run is one operator action (``rota audit``: the schedule, the range)
with ``--reason`` and ``--actor``; a dry run records nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli import bounds
from rota.cli.common import (
    EXIT_OK,
    UserError,
    add_config_option,
    add_db_option,
    add_note_options,
    checked_arg,
    open_database,
    operator_note,
)
from rota.core.timefmt import parse_instant, utc_key
from rota.operations.schedules import (
    BACKFILL_LIMIT,
    BackfillCount,
    BackfillRefused,
    ScheduleRemoved,
    UnknownSchedule,
    backfill,
    count_backfill,
)


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "backfill",
        help="create every occurrence in [from, to) with its regular key",
        description=(
            "Create a job for every occurrence of NAME in [--from, --to), keyed like the "
            "scheduler keys them; occurrences that already have a job are counted, not "
            "duplicated, so running it twice creates nothing new. Occurrences at or before "
            "the newest one whose job was pruned (retention) are never created again."
        ),
    )
    p.add_argument("name", metavar="NAME", help="the schedule")
    p.add_argument("--from", dest="start", required=True, metavar="ISO", help="inclusive")
    p.add_argument(
        "--to", dest="end", required=True, metavar="ISO", help="exclusive; not after now"
    )
    p.add_argument(
        "--max",
        dest="limit",
        type=bounds.BACKFILL_MAX,
        default=BACKFILL_LIMIT,
        metavar="N",
        help=f"refuse more than N occurrences (default {BACKFILL_LIMIT:,})",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the count and the first and last keys"
    )
    add_note_options(p)
    add_db_option(p)
    add_config_option(p)
    p.set_defaults(func=run)


MAX_LIMIT = bounds.BACKFILL_MAX.high


def _dry_run(args: argparse.Namespace, counted: BackfillCount) -> int:
    more = "" if counted.exact else "more than "
    print(f"{args.name}: {more}{counted.count:,} occurrences (dry run: nothing created)")
    print(f"  first: {counted.first_key or '-'}")
    print(f"  last:  {counted.last_key or ('-' if counted.exact else '(not counted that far)')}")
    if counted.dst_skipped:
        print(f"  {counted.dst_skipped} skipped by the DST policy")
    if counted.pruned and counted.pruned_through is not None:
        least = "" if counted.pruned_exact else "at least "
        print(
            f"  {least}{counted.pruned:,} at or before {utc_key(counted.pruned_through)}, where "
            "finished jobs were pruned: left out by the real run"
        )
    if not counted.exact or counted.count > args.limit:
        print(f"  more than --max {args.limit:,}: the real run would be refused")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    name = checked_arg("NAME", args.name)
    note = operator_note(args)
    try:
        start = parse_instant(args.start)
        end = parse_instant(args.end)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if end <= start:
        raise UserError(f"--to {utc_key(end)} must be later than --from {utc_key(start)}")
    with open_database(args) as engine:
        try:
            if args.dry_run:
                return _dry_run(args, count_backfill(engine, name, start, end, args.limit))
            result = backfill(engine, name, start, end, limit=args.limit, note=note)
        except (UnknownSchedule, ScheduleRemoved, BackfillRefused) as exc:
            raise UserError(str(exc)) from None
    line = (
        f"{args.name} [{utc_key(start)}, {utc_key(end)}): {result.created} created, "
        f"{result.existing} already existed"
    )
    if result.dst_skipped:
        line += f", {result.dst_skipped} skipped by the DST policy"
    if result.pruned and result.pruned_through is not None:
        line += (
            f", {result.pruned} left out (at or before "
            f"{utc_key(result.pruned_through)}, where finished jobs were pruned)"
        )
    print(line)
    return EXIT_OK
