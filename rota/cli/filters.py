"""The job filter options shared by ``rota jobs``, ``rota cancel`` and ``rota replay``.

``--state S[,S...]`` (any case, repeatable), ``--type T`` and ``--schedule NAME``
(repeatable: names may hold commas), ``--since D`` (a duration back from the
database clock, like ``1h``, or an ISO-8601 instant). A state, job type or
schedule that does not exist is bad input (exit 2) with the close names:
a typo must not look like "no jobs".
"""

from __future__ import annotations

import argparse
import difflib
from datetime import datetime

from sqlalchemy import Connection

from rota.cli.common import UserError, checked_arg
from rota.core.durations import DurationError, DurationTooLong, parse_duration
from rota.core.queries.jobs_read import JobFilter, database_now
from rota.core.states import ALL_STATES
from rota.core.timefmt import parse_instant
from rota.operations.jobs import UnknownName, check_names


def add_filter_options(parser: argparse.ArgumentParser, *, states_help: str | None = None) -> None:
    parser.add_argument(
        "--state",
        action="append",
        metavar="S[,S...]",
        help=states_help or "one or more of " + ", ".join(ALL_STATES),
    )
    parser.add_argument("--type", action="append", metavar="T", help="job type (repeatable)")
    parser.add_argument("--schedule", action="append", metavar="NAME", help="(repeatable)")
    parser.add_argument(
        "--since",
        metavar="D|ISO",
        help="created at or after: a duration ago (1h, 30m, 2d) or an ISO-8601 instant",
    )


def has_filter(args: argparse.Namespace) -> bool:
    return bool(args.state or args.type or args.schedule or args.since)


def parse_states(values: list[str] | None) -> tuple[str, ...]:
    """The states named, in the order of ``ALL_STATES``; an unknown one is exit 2."""
    wanted: set[str] = set()
    for value in values or ():
        if not value.replace(",", "").strip():  # `--state "$EMPTY"` must not mean "any state"
            raise UserError(
                f"--state: no state named in {value!r}; states: {', '.join(ALL_STATES)}"
            )
        for word in value.split(","):
            name = word.strip().upper()
            if not name:
                continue
            if name not in ALL_STATES:
                close = difflib.get_close_matches(name, ALL_STATES, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]}? " if close else ""
                raise UserError(
                    f"--state: unknown state {word.strip()[:40]!r}; {hint}"
                    f"states: {', '.join(ALL_STATES)}"
                )
            wanted.add(name)
    return tuple(s for s in ALL_STATES if s in wanted)


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: ``now`` minus a duration, or an ISO instant."""
    checked_arg("--since", text, 100)
    try:
        return now - parse_duration(text)
    except DurationTooLong as exc:
        raise UserError(f"--since: {exc}") from None
    except DurationError:
        pass  # not a duration: an instant, perhaps
    try:
        return parse_instant(text)
    except OverflowError:  # in range as written, out of it in UTC (9999-12-31T23:00-05:00)
        raise UserError(
            f"--since: {text[:100]!r} is out of the range of instants (years 1 to 9999 in UTC)"
        ) from None
    except ValueError:
        raise UserError(
            f"--since: {text!r} is neither a duration (like 1h, 30m or 2d) nor an ISO-8601 "
            "instant (like 2026-03-29T01:00:00Z)"
        ) from None


_OPTION = {"job_type": "--type", "schedule": "--schedule"}


def job_filter(conn: Connection, args: argparse.Namespace) -> JobFilter:
    """The filter the options describe; names that exist nowhere are refused (exit 2)."""
    types = tuple(dict.fromkeys(checked_arg("--type", t) for t in args.type or ()))
    schedules = tuple(dict.fromkeys(checked_arg("--schedule", s) for s in args.schedule or ()))
    states = parse_states(args.state)
    try:
        check_names(conn, JobFilter(job_types=types, schedules=schedules))
    except UnknownName as exc:
        raise UserError(f"{_OPTION[exc.field]}: {exc}") from None
    since = parse_since(args.since, database_now(conn)) if args.since else None
    return JobFilter(states=states, job_types=types, schedules=schedules, created_since=since)
