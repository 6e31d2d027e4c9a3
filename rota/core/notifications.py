"""Webhook targets: the events, the target, and the rules its URL must meet.

A target (``NotificationTarget``) is what the schedule file's
``notifications:`` section declares and `rota apply` stores in
``notification_targets``. Deliveries are rota jobs of ``DELIVERY_JOB_TYPE``,
enqueued by ``rota.producer.notify`` (which also says how they are retried)
and run by ``rota.executor.notify_delivery``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit


class NotificationEvent(StrEnum):
    JOB_FAILED = "job_failed"  # a job reached FAILED
    DEADLINE_MISSED = "deadline_missed"  # an occurrence was late
    SCHEDULE_SET_ASIDE = "schedule_set_aside"
    HANDLER_UNAVAILABLE = "handler_unavailable"
    NEEDS_RECONCILE = "needs_reconcile"


DELIVERY_JOB_TYPE = "rota.notify"
DELIVERY_HTTP_TIMEOUT = timedelta(seconds=10)  # each step of one POST (default)
MAX_HTTP_TIMEOUT = timedelta(seconds=50)  # below the delivery attempt's own timeout (1 min)
# Names starting with this are rota's own job types: a file may not declare them.
RESERVED_JOB_TYPE_PREFIX = "rota."

# rota.core.config.DEFAULT_POOL (config imports this module; a test keeps them equal).
DEFAULT_POOL = "default"
MAX_TARGETS = 100  # per file: the failing job's path reads them all, so few
URL_MAX = 2_000
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")


def url_problem(url: str, *, insecure: bool = False) -> str | None:
    """What is wrong with a webhook URL (None: nothing); never repeats the URL itself.

    https anywhere; plain http only to a loopback host, or with ``insecure``.
    No user name or password: secrets go in ``secret_env``, and URLs are shown.
    """
    if len(url) > URL_MAX:
        return f"is longer than {URL_MAX} characters"
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("https", "http"):
        return "must start with https:// (or http:// to a loopback host)"
    if not parts.hostname:
        return "has no host"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password (put the secret in secret_env)"
    if parts.scheme == "http" and not insecure and not is_loopback(parts.hostname):
        return "plain http is allowed only to a loopback host; use https, or set insecure: true"
    return None


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shown_url(url: str) -> str:
    """Scheme, host and port only: a webhook's path often is its secret (Slack's is),
    and a query or fragment (``?token=...``) as often."""
    parts = urlsplit(url)
    hidden = parts.path not in ("", "/") or parts.query or parts.fragment
    return f"{parts.scheme}://{parts.netloc}/..." if hidden else url


@dataclass(frozen=True)
class NotificationTarget:
    """One webhook target. ``schedules`` / ``job_types`` None: every one matches."""

    name: str
    url: str
    events: tuple[NotificationEvent, ...]
    secret_env: str
    schedules: tuple[str, ...] | None = None
    job_types: tuple[str, ...] | None = None
    pool: str = DEFAULT_POOL
    insecure: bool = False
    timeout: timedelta = DELIVERY_HTTP_TIMEOUT  # of one POST

    def matches(self, event: NotificationEvent, schedule: str | None, job_type: str | None) -> bool:
        """Whether an event of this kind, schedule and job type goes to this target.

        A filter on schedules (job types) lets through only events that name one
        of them: an ad-hoc job's failure has no schedule.
        """
        if event not in self.events:
            return False
        if self.schedules is not None and schedule not in self.schedules:
            return False
        return self.job_types is None or job_type in self.job_types

    def describe(self) -> str:
        """One line for `rota check` and `rota apply`: no secret, no URL path."""
        parts = [shown_url(self.url), "events: " + ", ".join(e.value for e in self.events)]
        if self.schedules is not None:
            parts.append("schedules: " + ", ".join(self.schedules))
        if self.job_types is not None:
            parts.append("job types: " + ", ".join(self.job_types))
        parts.append(f"secret from ${self.secret_env}")
        parts.append(f"pool {self.pool}")
        if self.timeout != DELIVERY_HTTP_TIMEOUT:
            parts.append(f"timeout {self.timeout.total_seconds():g}s")
        if self.insecure:
            parts.append("insecure")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "events": [e.value for e in self.events],
            "secret_env": self.secret_env,
            "schedules": list(self.schedules) if self.schedules is not None else None,
            "job_types": list(self.job_types) if self.job_types is not None else None,
            "pool": self.pool,
            "insecure": self.insecure,
            "timeout_seconds": self.timeout.total_seconds(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NotificationTarget:
        schedules, job_types = data.get("schedules"), data.get("job_types")
        return cls(
            name=data["name"],
            url=data["url"],
            events=tuple(NotificationEvent(e) for e in data["events"]),
            secret_env=data["secret_env"],
            schedules=tuple(schedules) if schedules is not None else None,
            job_types=tuple(job_types) if job_types is not None else None,
            pool=data.get("pool", DEFAULT_POOL),
            insecure=bool(data.get("insecure", False)),
            timeout=timedelta(
                seconds=float(data.get("timeout_seconds", DELIVERY_HTTP_TIMEOUT.total_seconds()))
            ),
        )
