"""``rota schedules [--json]``: the declared schedules, their next and last fire, and skips.

Skipped occurrences are counted by reason (misfire, dst, overlap, paused; the
``schedule_skips`` ledger), with the latest range of each; the last operator
action (pause or resume: who, when, why) is shown too, the newest occurrence
that ended (its state) with the newest that succeeded, and the last late
occurrence of a schedule with a deadline (``last_late``; ``rota late`` lists them all).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import RowMapping

from rota.cli.common import EXIT_OK, add_config_option, add_db_option, open_database
from rota.cli.status import action_json, action_line
from rota.core.config import ScheduleSpec
from rota.core.queries.late_occurrences import last_late_by_schedule
from rota.core.queries.operator_actions import latest_schedule_actions
from rota.core.queries.schedule_outcomes import ScheduleOutcome, schedule_outcomes
from rota.core.queries.schedule_skips import latest_by_reason, totals_by_reason
from rota.core.queries.schedules import list_schedules
from rota.core.states import SkipReason
from rota.core.timefmt import utc_key
from rota.scheduler.deadlines import late_json


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "schedules", help="list schedules: next fire, last fire, paused, skipped counts"
    )
    p.add_argument("--json", action="store_true", help="print a JSON list")
    add_db_option(p)
    add_config_option(p)
    p.set_defaults(func=run)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else utc_key(value)


def _local(value: datetime | None, zone: str) -> str | None:
    if value is None:
        return None
    try:
        return value.astimezone(ZoneInfo(zone)).isoformat()
    except (ValueError, OSError):  # a zone this machine does not know
        return None


def describe(
    row: RowMapping,
    totals: dict[str, int],
    latest: dict[str, RowMapping],
    action: RowMapping | None = None,
    late: RowMapping | None = None,
    outcome: ScheduleOutcome | None = None,
) -> dict[str, Any]:
    try:
        spec: ScheduleSpec | None = ScheduleSpec.from_json(row["definition"])
    except Exception:  # a stored definition this rota cannot read: show what it can
        spec = None
    raw = row["definition"] if isinstance(row["definition"], dict) else {}
    zone = spec.timezone if spec is not None else str(raw.get("timezone", "UTC"))
    return {
        "name": row["name"],
        "rule": spec.rule_text if spec is not None else _raw_rule(raw),
        "timezone": zone,
        "job_type": row["job_type"],
        "misfire": spec.misfire.value if spec is not None else str(raw.get("misfire")),
        "overlap": spec.overlap.value if spec is not None else str(raw.get("overlap")),
        "set_aside_reason": row["set_aside_reason"],
        "next_fire_at": _instant(row["next_fire_at"]),
        "next_fire_local": _local(row["next_fire_at"], zone),
        "last_fire_at": _instant(row["last_fire_at"]),
        "last_job_id": str(row["last_job_id"]) if row["last_job_id"] else None,
        "cursor_at": _instant(row["cursor_at"]),
        "paused": bool(row["paused"]),
        "paused_at": _instant(row["paused_at"]),
        "removed": bool(row["removed"]),
        "skipped_count": int(row["skipped_count"]),
        "coalesced_count": int(row["coalesced_count"]),
        "skipped_by_reason": {
            reason: n for reason, n in sorted(totals.items()) if reason != SkipReason.COALESCED
        },
        "last_action": action_json(action) if action is not None else None,
        "deadline": raw.get("deadline"),
        "last_late": late_json(late) if late is not None else None,
        "last_outcome": None
        if outcome is None
        else {
            "state": outcome.state.value,
            "instant": _instant(outcome.instant),
            "finished_at": _instant(outcome.finished_at),
        },
        "last_success": None if outcome is None else _instant(outcome.success_instant),
        "skips": {
            reason: {
                "total": totals.get(reason, 0),
                "latest": {
                    "first": _instant(r["first_instant"]),
                    "last": _instant(r["last_instant"]),
                    "count": int(r["count"]),
                    "job_id": str(r["job_id"]) if r["job_id"] else None,
                    "recorded_at": _instant(r["recorded_at"]),
                },
            }
            for reason, r in sorted(latest.items())
        },
    }


def _raw_rule(raw: dict[str, Any]) -> str:
    for kind in ("cron", "rrule", "every"):
        if raw.get(kind) is not None:
            return f"{kind} {raw[kind]}"
    return "(no rule)"


def _status(d: dict[str, Any]) -> str:
    if d["removed"]:
        return "removed"
    if d["paused"]:
        return "paused"
    if d["set_aside_reason"]:
        return "set aside"
    return "active"


def render(items: list[dict[str, Any]]) -> str:
    if not items:
        return "no schedules: run `rota apply FILE`"
    lines = []
    for d in items:
        lines.append(
            f"{d['name']}  [{_status(d)}]  {d['rule']}  ({d['timezone']})  -> {d['job_type']}"
        )
        if d["set_aside_reason"]:
            lines.append(f"    set aside: {d['set_aside_reason']} (retried every minute)")
        nxt = d["next_fire_at"] or "-"
        if d["next_fire_local"]:
            nxt += f"  (local {d['next_fire_local']})"
        lines.append(f"    next fire: {nxt}")
        lines.append(f"    last fire: {d['last_fire_at'] or '-'}")
        if d["last_outcome"] is not None:
            o = d["last_outcome"]
            lines.append(
                f"    last outcome: {o['state']} for {o['instant']} (finished {o['finished_at']}); "
                f"last success: {d['last_success'] or '-'}"
            )
        by_reason = ", ".join(f"{r} {n}" for r, n in d["skipped_by_reason"].items())
        lines.append(
            f"    skipped: {d['skipped_count']}{f' ({by_reason})' if by_reason else ''}  "
            f"coalesced: {d['coalesced_count']}  "
            f"(misfire {d['misfire']}, overlap {d['overlap']})"
        )
        if d["last_action"] is not None:
            lines.append(f"    last action: {action_line(d['last_action'])}")
        if d["deadline"] is not None or d["last_late"] is not None:
            lines.append(f"    deadline: {d['deadline'] or '-'}  last late: {_late_line(d)}")
        for reason, s in d["skips"].items():
            latest = s["latest"]
            lines.append(
                f"      {reason}: {s['total']} in all; latest {latest['count']} "
                f"from {latest['first']} to {latest['last']}"
            )
    return "\n".join(lines)


def _late_line(d: dict[str, Any]) -> str:
    late = d["last_late"]
    if late is None:
        return "-"
    return f"{late['instant']} ({late['reason']}, detected {late['detected_at']})"


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine, engine.begin() as conn:
        rows = list_schedules(conn)
        totals = totals_by_reason(conn)
        latest = latest_by_reason(conn)
        actions = latest_schedule_actions(conn)
        lates = last_late_by_schedule(conn)
        outcomes = schedule_outcomes(conn)
    items = [
        describe(
            r,
            totals.get(r["name"], {}),
            latest.get(r["name"], {}),
            actions.get(r["name"]),
            lates.get(r["name"]),
            outcomes.get(r["name"]),
        )
        for r in rows
    ]
    print(json.dumps(items, indent=2) if args.json else render(items))
    return EXIT_OK
