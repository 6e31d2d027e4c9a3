"""What a job and a schedule look like over HTTP.

A job resource reports a state, not a guess: queued (and when it is due),
running with its progress and the age of its last heartbeat, waiting to retry
after which error, succeeded with its result reference, failed with its error
code and detail, cancelled; its attempts, timestamps and operator actions.
Instants are UTC ISO-8601 with six fractional digits and ``Z``
(``2026-12-01T02:00:00.000000Z``): one width, so their text sorts as they do.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from rota.core.config import ScheduleSpec
from rota.core.queries.operator_actions import audit_entry
from rota.core.queries.schedule_outcomes import ScheduleOutcome
from rota.core.states import CLAIMABLE, LEASED, JobState
from rota.core.timefmt import as_utc

Row = Mapping[Any, Any]  # a SQLAlchemy RowMapping


def instant(value: datetime | None) -> str | None:
    if value is None:
        return None
    return as_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else round(max(0.0, (now - then).total_seconds()), 3)


def job_location(job_id: uuid.UUID | str) -> str:
    return f"/jobs/{job_id}"


def audit_resource(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An operator action (``rota.core.queries.operator_actions.audit_entry``) over HTTP."""
    return {**entry, "at": instant(entry["at"])}


def job_resource(
    job: Row,
    now: datetime,
    attempts: Sequence[Row] | None = None,
    *,
    args: bool = True,
    actions: Sequence[Row] | None = None,
) -> dict[str, Any]:
    """One job; ``args=False`` leaves its arguments out (lists: they can be a megabyte each).

    ``actions``: its operator actions (``operator_actions`` rows), oldest first.
    """
    state = job["state"]
    job_id = str(job["job_id"])
    data: dict[str, Any] = {
        "job_id": job_id,
        "job_type": job["job_type"],
        "pool": job["pool"],
        "state": state,
        "priority": job["priority"],
        "tenant": job["tenant"],
        "concurrency_key": job["concurrency_key"],
        "dedup_key": job["dedup_key"],
        "payload_ref": job["payload_ref"],
        "args": job["args"] if args else None,
        "schedule": job["schedule_name"],
        "scheduled_for": instant(job["scheduled_for"]),
        "attempt_count": job["attempt_count"],
        "max_attempts": job["max_attempts"],
        "run_after": instant(job["run_after"]),
        "due": state in CLAIMABLE and job["run_after"] <= now,
        "created_at": instant(job["created_at"]),
        "updated_at": instant(job["updated_at"]),
        "started_at": instant(job["started_at"]),
        "finished_at": instant(job["finished_at"]),
        "cancel_requested_at": instant(job["cancel_requested_at"]),
        "result_ref": job["result_ref"],
        "needs_reconcile": bool(job["needs_reconcile"]),
        "error": None,
        "progress": None,
        "lease": None,
        "links": {"self": job_location(job_id)},
    }
    if job["last_error_code"] is not None:
        data["error"] = {"code": job["last_error_code"], "detail": job["last_error_detail"]}
    if any(job[k] is not None for k in ("progress_stage", "progress_done", "progress_total")):
        data["progress"] = {
            "stage": job["progress_stage"],
            "done": job["progress_done"],
            "total": job["progress_total"],
        }
    if state in LEASED:
        beat = job["heartbeat_at"] or job["started_at"]
        data["lease"] = {
            "owner": job["lease_owner"],
            "generation": job["lease_generation"],
            "expires_at": instant(job["lease_expires_at"]),
            "expired": job["lease_expires_at"] is not None and job["lease_expires_at"] <= now,
            "last_heartbeat_at": instant(beat),
            "last_heartbeat_age_seconds": _age(now, beat),
        }
    if state in CLAIMABLE or state == JobState.RUNNING:
        data["links"]["cancel"] = job_location(job_id) + "/cancel"
    if state == JobState.FAILED:
        data["links"]["replay"] = job_location(job_id) + "/replay"
    if attempts is not None:
        data["attempts"] = [attempt_resource(a) for a in attempts]
    if actions is not None:
        data["actions"] = [audit_resource(audit_entry(a)) for a in actions]
    return data


def attempt_resource(a: Row) -> dict[str, Any]:
    ended = a["ended_at"]
    return {
        "attempt": a["attempt"],
        "lease_generation": a["lease_generation"],
        "worker_id": a["worker_id"],
        "started_at": instant(a["started_at"]),
        "ended_at": instant(ended),
        "seconds": None if ended is None else round((ended - a["started_at"]).total_seconds(), 3),
        "outcome": a["outcome"],
        "error_code": a["error_code"],
        "error_detail": a["error_detail"],
    }


def schedule_resource(
    row: Row,
    totals: Mapping[str, int],
    ledger: Sequence[Row] | None = None,
    actions: Sequence[Row] | None = None,
) -> dict[str, Any]:
    """One schedule; with its skip ledger and its operator actions (oldest first) if given."""
    spec = ScheduleSpec.from_json(row["definition"])
    name = row["name"]
    path = f"/schedules/{quote(name, safe='')}"
    data: dict[str, Any] = {
        "name": name,
        "job_type": row["job_type"],
        "rule": spec.rule_text,
        "timezone": spec.timezone,
        "misfire": spec.misfire.value,
        "overlap": spec.overlap.value,
        "paused": bool(row["paused"]),
        "paused_at": instant(row["paused_at"]),
        "removed": bool(row["removed"]),
        "next_fire_at": instant(row["next_fire_at"]),
        "last_fire_at": instant(row["last_fire_at"]),
        "last_job_id": str(row["last_job_id"]) if row["last_job_id"] else None,
        "skipped_count": int(row["skipped_count"]),
        "coalesced_count": int(row["coalesced_count"]),
        "skipped_by_reason": dict(sorted(totals.items())),
        "links": {
            "self": path,
            "pause": f"{path}/pause",
            "resume": f"{path}/resume",
            "trigger": f"{path}/trigger",
            "jobs": f"/jobs?schedule={quote(name, safe='')}",
        },
    }
    if ledger is not None:
        data["skip_ledger"] = [
            {
                "reason": s["reason"],
                "first": instant(s["first_instant"]),
                "last": instant(s["last_instant"]),
                "count": int(s["count"]),
                "job_id": str(s["job_id"]) if s["job_id"] else None,
                "recorded_at": instant(s["recorded_at"]),
            }
            for s in ledger
        ]
    if actions is not None:
        data["actions"] = [audit_resource(audit_entry(a)) for a in actions]
    return data


def schedule_health(outcome: ScheduleOutcome | None) -> dict[str, Any]:
    """``last_outcome`` (the newest occurrence that ended) and ``last_success`` (its instant)."""
    if outcome is None:
        return {"last_outcome": None, "last_success": None}
    return {
        "last_outcome": {
            "state": outcome.state.value,
            "instant": instant(outcome.instant),
            "finished_at": instant(outcome.finished_at),
        },
        "last_success": instant(outcome.success_instant),
    }
