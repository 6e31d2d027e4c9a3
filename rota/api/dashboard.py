"""``GET /``: the dashboard page, and ``GET /dashboard/data``: everything it shows, in one read.

The page is one HTML document with its stylesheet and script inline (no CDN,
no build step: clusters are often offline), served with a Content-Security-
Policy that allows exactly that script and stylesheet by hash. The script
builds the page with ``textContent`` and DOM nodes only, never HTML from data:
job arguments and error details are hostile and are shown as text.

Percentiles come from the per-minute histogram buckets of the last hour
(``metric_minutes``), interpolated within a bucket like Prometheus'
``histogram_quantile``: an estimate whose precision is the bucket width.
"""

from __future__ import annotations

import base64
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any

from sqlalchemy import Connection

from rota.api.failed_counts import FailedCounts
from rota.api.late import last_late, with_last_late
from rota.api.resources import instant, job_resource, schedule_health, schedule_resource
from rota.core.metric_deltas import (
    BY_NAME,
    CANCEL_LATENCY,
    END_TO_END,
    EXECUTION,
    EXPIRED_LEASES,
    INF,
    QUEUE_WAIT,
    SCHEDULER_DELAY,
    decode_labels,
    parse_le,
)
from rota.core.queries.job_types import load_job_types
from rota.core.queries.jobs_gauges import oldest_due_by_pool, stuck_by_pool, unfinished_by_state
from rota.core.queries.jobs_read import database_now, recent_failed
from rota.core.queries.metric_tables import read_minutes, read_totals
from rota.core.queries.operator_actions import latest_schedule_actions
from rota.core.queries.schedule_outcomes import schedule_outcomes
from rota.core.queries.schedule_skips import totals_by_reason
from rota.core.queries.schedules import list_schedules
from rota.core.queries.workers import list_workers

WINDOW = timedelta(hours=1)
FAILED_SHOWN = 50
QUANTILES = (0.5, 0.95, 0.99)
REFRESH_SECONDS = 5


@cache
def _asset(name: str) -> str:
    return resources.files("rota.api").joinpath("static", name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


@cache
def page() -> tuple[bytes, str]:
    """The page and its Content-Security-Policy (inline script and style, allowed by hash)."""
    css, js = _asset("dashboard.css"), _asset("dashboard.js")
    html = (
        _asset("dashboard.html")
        .replace("/*STYLE*/", css)
        .replace("/*SCRIPT*/", js.replace("REFRESH_SECONDS", str(REFRESH_SECONDS)))
    )
    script = html.split("<script>", 1)[1].split("</script>", 1)[0]
    style = html.split("<style>", 1)[1].split("</style>", 1)[0]
    csp = (
        "default-src 'none'; "
        f"script-src '{_hash(script)}'; style-src '{_hash(style)}'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return html.encode(), csp


def quantile(q: float, buckets: Mapping[str, float]) -> float | None:
    """The ``q`` quantile of a histogram given as {le: count in that bucket}."""
    bounds = sorted((parse_le(le), n) for le, n in buckets.items())
    total = sum(n for _, n in bounds)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    lower = 0.0
    for upper, n in bounds:
        if n > 0 and seen + n >= rank:
            if upper == INF:
                return lower  # beyond the largest bound: the bound is all we know
            return lower + (upper - lower) * ((rank - seen) / n)
        seen += n
        if upper != INF:
            lower = upper
    return lower


EVERY_SCHEDULE = "every schedule"  # the key of a histogram without a label to group by


def _summaries(
    rows: Sequence[Mapping[Any, Any]], metric: str, key_index: int | None
) -> dict[str, Any]:
    """Per label value (``key_index``; None: one for all): last-hour quantiles and a
    per-minute series."""
    whole: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    minutes: dict[str, dict[datetime, dict[str, float]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(float))
    )
    for r in rows:
        if r["metric"] != metric:
            continue
        key = EVERY_SCHEDULE if key_index is None else decode_labels(r["labels"])[key_index]
        whole[key][r["le"]] += float(r["n"])
        minutes[key][r["minute"]][r["le"]] += float(r["n"])
    out: dict[str, Any] = {}
    for key, buckets in sorted(whole.items()):
        series = [
            {
                "minute": instant(minute),
                "count": sum(b.values()),
                "p50": quantile(0.5, b),
                "p95": quantile(0.95, b),
            }
            for minute, b in sorted(minutes[key].items())
        ]
        out[key] = {
            "count": sum(buckets.values()),
            **{f"p{round(q * 100)}": quantile(q, buckets) for q in QUANTILES},
            "series": series,
        }
    return out


def _counter_window(rows: Iterable[Mapping[Any, Any]], metric: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        if r["metric"] == metric:
            out[decode_labels(r["labels"])[0]] += float(r["n"])
    return dict(out)


def _paused_by(row: Mapping[Any, Any], action: Mapping[Any, Any] | None) -> dict[str, Any] | None:
    """Who paused a paused schedule, when and why: its newest pause (or resume) action."""
    if not row["paused"] or action is None or action["action"] != "pause":
        return None
    return {"actor": action["actor"], "reason": action["reason"], "at": instant(action["at"])}


def dashboard_data(conn: Connection, failed_counts: FailedCounts) -> dict[str, Any]:
    now = database_now(conn)
    types = load_job_types(conn)
    failed_count = failed_counts.read(conn)
    counts = [*unfinished_by_state(conn), *failed_count.counts]
    oldest = oldest_due_by_pool(conn, now)
    stuck = stuck_by_pool(conn, now)
    window = read_minutes(conn, now - WINDOW, list(BY_NAME))
    totals = read_totals(conn)
    schedules = list_schedules(conn)
    skips = totals_by_reason(conn)
    lates = last_late(conn)
    state_actions = latest_schedule_actions(conn)
    outcomes = schedule_outcomes(conn)
    failed = recent_failed(conn, FAILED_SHOWN)
    workers = [w.to_json() for w in list_workers(conn, now=now)]

    table: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    for spec in types.values():
        table[spec.pool].setdefault(spec.name, {})
    for c in counts:
        table[c.pool].setdefault(c.job_type, {})
        row = table[c.pool][c.job_type]
        row[c.state] = row.get(c.state, 0) + c.count
    pools = []
    for pool in sorted(set(table) | set(oldest) | set(stuck)):
        due = oldest.get(pool)
        pools.append(
            {
                "pool": pool,
                "oldest_runnable_age_seconds": (
                    0.0 if due is None else max(0.0, (now - due).total_seconds())
                ),
                "stuck_running": stuck.get(pool, 0),
                "job_types": [
                    {"job_type": name, **{s.lower(): n for s, n in states.items()}}
                    for name, states in sorted(table.get(pool, {}).items())
                ],
            }
        )
    expired_total = _counter_window(totals, EXPIRED_LEASES.name)
    expired_hour = _counter_window(window, EXPIRED_LEASES.name)
    return {
        "now": instant(now),
        "refresh_seconds": REFRESH_SECONDS,
        "pools": pools,
        "failed_count_age_seconds": failed_count.age_seconds,
        "latency": {
            "queue_wait": _summaries(window, QUEUE_WAIT.name, 0),
            "execution": _summaries(window, EXECUTION.name, 0),
            "end_to_end": _summaries(window, END_TO_END.name, 0),
            "cancel_latency": _summaries(window, CANCEL_LATENCY.name, 0),
            "scheduler_delay": _summaries(window, SCHEDULER_DELAY.name, None),
        },
        "expired_leases": {
            name: {"last_hour": expired_hour.get(name, 0.0), "total": n}
            for name, n in sorted(expired_total.items())
        },
        "schedules": [
            with_last_late(
                {
                    **schedule_resource(r, skips.get(r["name"], {})),
                    "paused_by": _paused_by(r, state_actions.get(r["name"])),
                    **schedule_health(outcomes.get(r["name"])),
                },
                lates,
            )
            for r in schedules
        ],
        "failed": [job_resource(j, now, args=False) for j in failed],
        "workers": workers,
    }
