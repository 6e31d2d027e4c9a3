"""What a job is doing, in words a person on call can act on.

* ``running on host:123:ab12, last heartbeat 12 s ago, stage GENERATING 340/1000``
* ``waiting to retry at 14:05:10Z after TIMEOUT (attempt 2 of 5)``
* ``failed: PAYMENT_DECLINED, card expired (attempt 5 of 5)``
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rota.core.states import JobState
from rota.core.timefmt import as_utc

Row = Mapping[Any, Any]  # a job or attempt row (SQLAlchemy RowMapping)

# C0 and C1 controls but tab and newline: ESC, BEL, CR and the like drive a terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` for a terminal: each control character but tab and newline as ``\\xNN``.

    An error detail or an output is whatever a handler wrote; an escape sequence in
    it would otherwise retitle, clear or rewrite the operator's terminal.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _ago(now: datetime, then: datetime | None) -> str:
    if then is None:
        return "never"
    secs = max(0.0, (now - then).total_seconds())
    if secs < 120:
        return f"{secs:.0f} s ago"
    if secs < 7200:
        return f"{secs / 60:.0f} min ago"
    return f"{secs / 3600:.1f} h ago"


def _at(instant: datetime | None) -> str:
    return "-" if instant is None else instant.strftime("%Y-%m-%d %H:%M:%SZ")


def _progress(job: Row) -> str:
    parts = []
    if job["progress_stage"]:
        parts.append(f"stage {job['progress_stage']}")
    if job["progress_done"] is not None:
        total = job["progress_total"]
        parts.append(
            f"{job['progress_done']}/{total}"
            if total is not None
            else f"{job['progress_done']} done"
        )
    return " ".join(parts)


def _attempts(job: Row) -> str:
    return f"attempt {job['attempt_count']} of {job['max_attempts']}"


def describe(job: Row, now: datetime) -> str:
    """One line that says what the job is doing and what happens next."""
    state = job["state"]
    if state in (JobState.RUNNING, JobState.CANCEL_REQUESTED):
        beat = job["heartbeat_at"] or job["started_at"]
        text = f"running on {job['lease_owner']}, last heartbeat {_ago(now, beat)}"
        progress = _progress(job)
        if progress:
            text += f", {progress}"
        if job["lease_expires_at"] is not None and job["lease_expires_at"] < now:
            text += f", lease expired {_ago(now, job['lease_expires_at'])} (the sweeper will act)"
        if state == JobState.CANCEL_REQUESTED:
            text = "cancel requested, waiting for the worker to stop; " + text
        return f"{text} ({_attempts(job)})"
    if state == JobState.RETRY_WAIT:
        after = job["last_error_code"] or "an error"
        when = "now" if job["run_after"] <= now else f"at {_at(job['run_after'])}"
        return f"waiting to retry {when} after {after} ({_attempts(job)})"
    if state == JobState.QUEUED:
        if job["run_after"] > now:
            return f"queued, due at {_at(job['run_after'])}"
        return f"queued, due {_ago(now, job['run_after'])}, waiting for an executor"
    if state == JobState.SUCCEEDED:
        text = f"succeeded at {_at(job['finished_at'] or job['updated_at'])}"
        if job["result_ref"]:
            text += f", result {job['result_ref']}"
        return f"{text} ({_attempts(job)})"
    if state == JobState.FAILED:
        last_line = (job["last_error_detail"] or "").strip().splitlines()[-1:]
        detail = f", {last_line[0]}" if last_line else ""
        text = f"failed: {job['last_error_code'] or 'unknown error'}{detail} ({_attempts(job)})"
        if job["needs_reconcile"]:
            text += "; the outcome of the last attempt is unknown: check it, then `rota replay`"
        return text
    if state == JobState.CANCELLED:
        return f"cancelled at {_at(job['finished_at'] or job['updated_at'])}"
    return str(state)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def job_json(job: Row, now: datetime) -> dict[str, Any]:
    data = {k: _json_value(v) for k, v in job.items()}
    data["status"] = describe(job, now)
    return data


def attempt_json(attempt: Row) -> dict[str, Any]:
    return {k: _json_value(v) for k, v in attempt.items() if k != "attempt_id"}


def _cell(text: str | None, width: int) -> str:
    """``text`` in a column of ``width``, cut with an ellipsis when longer ("-" for none)."""
    value = text or "-"
    if len(value) > width:
        value = value[: width - 1] + "\u2026"
    return f"{value:{width}}"


def jobs_table(rows: Sequence[Row], now: datetime) -> str:
    lines = [f"{'JOB ID':36}  {'TYPE':20}  {'SCHEDULE':20}  {'STATE':16}  STATUS"]
    for job in rows:
        lines.append(
            f"{job['job_id']!s:36}  {_cell(job['job_type'], 20)}  "
            f"{_cell(job['schedule_name'], 20)}  {job['state']:16}  {describe(job, now)}"
        )
    return visible("\n".join(lines))


def action_line(action: Row) -> str:
    """``cancel by alice at 2026-03-02 10:00:00Z: the upstream API is down``.

    ``action`` is an ``operator_actions`` row, or its ``action_json`` form.
    """
    at = action["at"]
    if isinstance(at, str):  # the action_json form
        at = datetime.fromisoformat(at.replace("Z", "+00:00"))
    when = _at(at)
    why = f": {action['reason']}" if action["reason"] else " (no reason given)"
    return f"{action['action']} by {action['actor']} at {when}{why}"


def action_json(action: Row) -> dict[str, Any]:
    return {k: _json_value(action[k]) for k in ("action", "actor", "reason", "at")}


def audit_json(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An ``audit_entry`` as ``rota audit --json`` and ``GET /audit`` write it."""
    at = as_utc(entry["at"]).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return {**entry, "at": at}


def audit_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """One line per action, newest first; the reason last, as written."""
    rows = [
        (
            _at(e["at"]),
            e["actor"],
            e["action"],
            f"{e['target_kind']} {e['target']}" + (f" ({e['detail']})" if e["detail"] else ""),
            e["reason"] or "-",
        )
        for e in entries
    ]
    header = ("AT", "ACTOR", "ACTION", "TARGET", "REASON")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = []
    for r in [header, *rows]:
        padded = [f"{cell:{width}}" for cell, width in zip(r[:4], widths, strict=True)]
        lines.append("  ".join([*padded, r[4]]))
    return "\n".join(lines)


def job_detail(
    job: Row, attempts: Sequence[Row], now: datetime, actions: Sequence[Row] = ()
) -> str:
    lines = [
        f"job {job['job_id']}",
        f"  type        {job['job_type']} (pool {job['pool']}, priority {job['priority']})",
        f"  state       {job['state']}",
        f"  status      {describe(job, now)}",
    ]
    if job["schedule_name"]:
        lines.append(f"  schedule    {job['schedule_name']} for {_at(job['scheduled_for'])}")
        if job["covers_count"]:
            lines.append(
                f"  covers      {job['covers_count']} occurrences from {_at(job['covers_from'])}"
            )
    for key in ("dedup_key", "payload_ref", "tenant", "concurrency_key", "result_ref"):
        if job[key]:
            lines.append(f"  {key:<11} {job[key]}")
    if job["args"] is not None:
        lines.append(f"  args        {json.dumps(job['args'], sort_keys=True)}")
    lines.append(f"  created     {_at(job['created_at'])}, run after {_at(job['run_after'])}")
    if job["last_error_code"]:
        lines.append(f"  last error  {job['last_error_code']}")
        for detail_line in (job["last_error_detail"] or "").strip().splitlines()[-5:]:
            lines.append(f"              {detail_line}")
    lines.append("  attempts")
    if not attempts:
        lines.append("    none yet")
    for a in attempts:
        took = ""
        if a["ended_at"] is not None:
            took = f", {(a['ended_at'] - a['started_at']).total_seconds():.1f} s"
        outcome = a["outcome"] or "in progress"
        error = f" {a['error_code']}" if a["error_code"] else ""
        lines.append(
            f"    #{a['attempt']} gen {a['lease_generation']} on {a['worker_id']} at "
            f"{_at(a['started_at'])}{took}: {outcome}{error}"
        )
    if actions:
        lines.append("  operator actions")
        lines += [f"    {action_line(a)}" for a in actions]
    return visible("\n".join(lines))
