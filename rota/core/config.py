"""Frozen configuration objects for job types and schedules.

These are what the loader produces from the schedule file, what ``rota apply``
stores in the database (as JSON, via ``to_json``/``from_json``), and what the
scheduler and executors read back. Defaults are named constants so the docs,
the loader and the code agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any

from rota.core.durations import format_duration, parse_duration
from rota.core.notifications import NotificationTarget

DEFAULT_TIMEZONE = "UTC"
DEFAULT_GRACE = timedelta(minutes=1)
DEFAULT_CATCH_UP_WINDOW = timedelta(days=1)
DEFAULT_JITTER = timedelta(0)
DEFAULT_POOL = "default"
DEFAULT_LEASE = timedelta(seconds=60)
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_BACKOFF_BASE = timedelta(seconds=5)
DEFAULT_BACKOFF_MAX = timedelta(minutes=15)
# How long finished jobs are kept before they are pruned (per final state).
DEFAULT_RETAIN_SUCCEEDED = timedelta(days=7)
DEFAULT_RETAIN_CANCELLED = timedelta(days=7)
DEFAULT_RETAIN_FAILED = timedelta(days=30)
RETAIN_FOREVER = "forever"  # written instead of a duration: never pruned
DEFAULT_BACKOFF_JITTER = 0.2  # up to 20 % of the delay, added on top of it
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Ranges every producer and the schedule file are held to (documented in the README).
PRIORITY_MIN = -1_000_000
PRIORITY_MAX = 1_000_000
MAX_ATTEMPTS_MAX = 1_000
MAX_QUEUED_MAX = 1_000_000_000  # a job type's max_queued
# Ranges of the schedule file's durations (documented in the README); every
# other duration is at most rota.core.durations.MAX_DURATION (100 years).
MAX_GRACE = timedelta(days=366)
MAX_CATCH_UP_WINDOW = timedelta(days=366)
MAX_JITTER = timedelta(days=7)
MIN_DEADLINE = timedelta(seconds=1)
MAX_DEADLINE = timedelta(days=366)
MAX_LEASE = timedelta(days=1)
MAX_TIMEOUT = timedelta(days=30)
MAX_BACKOFF = timedelta(days=30)
MAX_EXCLUDE_DATES = 1_000
MAX_COMMAND_ITEMS = 1_000


class MisfirePolicy(StrEnum):
    CATCH_UP = "catch_up"
    SKIP = "skip"
    COALESCE = "coalesce"


class OverlapPolicy(StrEnum):
    ALLOW = "allow"
    FORBID = "forbid"
    REPLACE = "replace"


class Nonexistent(StrEnum):
    SHIFT = "shift"
    SKIP = "skip"


class Ambiguous(StrEnum):
    FIRST = "first"
    LAST = "last"
    BOTH = "both"


class Isolation(StrEnum):
    """Where a Python handler runs: a worker thread of the executor, or a child process."""

    THREAD = "thread"
    PROCESS = "process"


DEFAULT_ISOLATION = Isolation.THREAD
DEFAULT_MISFIRE = MisfirePolicy.COALESCE
DEFAULT_OVERLAP = OverlapPolicy.ALLOW


@dataclass(frozen=True)
class Backoff:
    """delay = min(max, base * 2^(n-1)) before jitter, n = attempts made so far (n >= 1).

    Jitter is added on top: up to ``jitter`` (a fraction from 0 to 1) of that delay,
    so a retry never comes sooner than the capped exponential says.
    """

    base: timedelta = DEFAULT_BACKOFF_BASE
    max: timedelta = DEFAULT_BACKOFF_MAX
    jitter: float = DEFAULT_BACKOFF_JITTER

    def delay_before_jitter(self, attempts_made: int) -> timedelta:
        n = max(1, attempts_made)
        base_s = self.base.total_seconds()
        cap_s = self.max.total_seconds()
        # 2^(n-1) overflows float past ~1000; the cap is reached long before.
        exp = min(n - 1, 64)
        return timedelta(seconds=min(cap_s, base_s * (2.0**exp)))


@dataclass(frozen=True)
class Retention:
    """How long finished jobs are kept, by final state; None keeps them forever.

    A job is pruned (with its attempt rows) once it has been finished for
    longer than the value of its state.
    """

    succeeded: timedelta | None = DEFAULT_RETAIN_SUCCEEDED
    cancelled: timedelta | None = DEFAULT_RETAIN_CANCELLED
    failed: timedelta | None = DEFAULT_RETAIN_FAILED

    def for_state(self, state: str) -> timedelta | None:
        """The retention of a terminal state (``SUCCEEDED``, ``FAILED``, ``CANCELLED``)."""
        return {
            "SUCCEEDED": self.succeeded,
            "CANCELLED": self.cancelled,
            "FAILED": self.failed,
        }[state]

    def to_json(self) -> dict[str, str]:
        return {
            "succeeded": _retain_text(self.succeeded),
            "cancelled": _retain_text(self.cancelled),
            "failed": _retain_text(self.failed),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Retention:
        """Missing keys (job types stored before retention existed) take the defaults."""
        data = data or {}
        default = cls()
        return cls(
            succeeded=_retain_value(data.get("succeeded"), default.succeeded),
            cancelled=_retain_value(data.get("cancelled"), default.cancelled),
            failed=_retain_value(data.get("failed"), default.failed),
        )


def _retain_text(value: timedelta | None) -> str:
    return RETAIN_FOREVER if value is None else format_duration(value)


def _retain_value(text: Any, default: timedelta | None) -> timedelta | None:
    if text is None:
        return default
    return None if text == RETAIN_FOREVER else parse_duration(text)


@dataclass(frozen=True)
class DstPolicy:
    nonexistent: Nonexistent
    ambiguous: Ambiguous


@dataclass(frozen=True)
class JobTypeSpec:
    """How one job type runs: exactly one of ``handler`` or ``command``."""

    name: str
    handler: str | None = None  # "module:function", a callable(ctx)
    command: tuple[str, ...] | None = None  # argv of a subprocess handler
    pool: str = DEFAULT_POOL
    timeout: timedelta | None = None  # execution timeout of one attempt
    lease: timedelta = DEFAULT_LEASE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)
    idempotent: bool = True
    reconcile: str | None = None  # "module:function", callable(ctx) -> bool (True: already done)
    priority: int = 0  # 0 runs first; larger numbers wait behind smaller ones
    # Backpressure (rota.producer.enqueue): producers are refused past these limits.
    max_queued: int | None = None  # jobs waiting in QUEUED or RETRY_WAIT
    max_queue_age: timedelta | None = None  # age of the oldest job waiting while due
    shed_below_priority: int | None = None  # priority numbers above this are refused first
    retain: Retention = field(default_factory=Retention)  # how long finished jobs are kept
    # PROCESS: each run of the Python handler in a child process (rota.executor.isolation).
    isolation: Isolation = DEFAULT_ISOLATION

    def to_json(self) -> dict[str, Any]:
        data = self._core_json()
        # Written only when set: a definition stored before these fields existed
        # reads back equal, and stays byte-for-byte the same.
        if self.max_queued is not None:
            data["max_queued"] = self.max_queued
        if self.max_queue_age is not None:
            data["max_queue_age"] = format_duration(self.max_queue_age)
        if self.shed_below_priority is not None:
            data["shed_below_priority"] = self.shed_below_priority
        if self.isolation is not DEFAULT_ISOLATION:
            data["isolation"] = self.isolation.value
        return data

    @property
    def has_limits(self) -> bool:
        return self.max_queued is not None or self.max_queue_age is not None

    def _core_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "handler": self.handler,
            "command": list(self.command) if self.command is not None else None,
            "pool": self.pool,
            "timeout": format_duration(self.timeout) if self.timeout is not None else None,
            "lease": format_duration(self.lease),
            "max_attempts": self.max_attempts,
            "backoff": {
                "base": format_duration(self.backoff.base),
                "max": format_duration(self.backoff.max),
                "jitter": self.backoff.jitter,
            },
            "idempotent": self.idempotent,
            "reconcile": self.reconcile,
            "priority": self.priority,
            "retain": self.retain.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobTypeSpec:
        backoff = data.get("backoff") or {}
        return cls(
            name=data["name"],
            handler=data.get("handler"),
            command=tuple(data["command"]) if data.get("command") is not None else None,
            pool=data.get("pool", DEFAULT_POOL),
            timeout=parse_duration(data["timeout"]) if data.get("timeout") else None,
            lease=parse_duration(data.get("lease") or "60s"),
            max_attempts=int(data.get("max_attempts", DEFAULT_MAX_ATTEMPTS)),
            backoff=Backoff(
                base=parse_duration(backoff.get("base", "5s")),
                max=parse_duration(backoff.get("max", "15m")),
                # Definitions stored before jitter was configurable lack it.
                jitter=float(backoff.get("jitter", DEFAULT_BACKOFF_JITTER)),
            ),
            idempotent=bool(data.get("idempotent", True)),
            reconcile=data.get("reconcile"),
            priority=int(data.get("priority", 0)),
            max_queued=int(data["max_queued"]) if data.get("max_queued") is not None else None,
            max_queue_age=(
                parse_duration(data["max_queue_age"]) if data.get("max_queue_age") else None
            ),
            shed_below_priority=(
                int(data["shed_below_priority"])
                if data.get("shed_below_priority") is not None
                else None
            ),
            retain=Retention.from_json(data.get("retain")),
            isolation=Isolation(data.get("isolation", DEFAULT_ISOLATION.value)),
        )


@dataclass(frozen=True)
class ScheduleSpec:
    """One declared schedule: exactly one of ``cron``, ``rrule`` or ``every``."""

    name: str
    job_type: str
    cron: str | None = None
    rrule: str | None = None
    every: timedelta | None = None
    anchor: datetime | None = None  # every: instants are anchor + k * every
    timezone: str = DEFAULT_TIMEZONE
    misfire: MisfirePolicy = DEFAULT_MISFIRE
    grace: timedelta = DEFAULT_GRACE
    catch_up_window: timedelta = DEFAULT_CATCH_UP_WINDOW
    dst: DstPolicy | None = None  # None: the rule's default (see scheduler.rules)
    jitter: timedelta = DEFAULT_JITTER
    overlap: OverlapPolicy = DEFAULT_OVERLAP
    payload_ref: str | None = None
    args: Mapping[str, Any] | None = None
    exclude_dates: tuple[date, ...] = ()
    # An occurrence not SUCCEEDED this long after its instant is late (scheduler.deadlines).
    deadline: timedelta | None = None

    @property
    def rule_text(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron}"
        if self.rrule is not None:
            return f"rrule {self.rrule}"
        assert self.every is not None
        return f"every {format_duration(self.every)}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "job_type": self.job_type,
            "cron": self.cron,
            "rrule": self.rrule,
            "every": format_duration(self.every) if self.every is not None else None,
            "anchor": self.anchor.astimezone(UTC).isoformat() if self.anchor else None,
            "timezone": self.timezone,
            "misfire": self.misfire.value,
            "grace": format_duration(self.grace),
            "catch_up_window": format_duration(self.catch_up_window),
            "dst": (
                {"nonexistent": self.dst.nonexistent.value, "ambiguous": self.dst.ambiguous.value}
                if self.dst is not None
                else None
            ),
            "jitter": format_duration(self.jitter),
            "overlap": self.overlap.value,
            "payload_ref": self.payload_ref,
            "args": dict(self.args) if self.args is not None else None,
            "exclude_dates": [d.isoformat() for d in self.exclude_dates],
        }
        # Written only when set: a schedule without one keeps the definition
        # (and its hash) it had before deadlines existed, so no apply sees a change.
        if self.deadline is not None:
            data["deadline"] = format_duration(self.deadline)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScheduleSpec:
        dst = data.get("dst")
        return cls(
            name=data["name"],
            job_type=data["job_type"],
            cron=data.get("cron"),
            rrule=data.get("rrule"),
            every=parse_duration(data["every"]) if data.get("every") else None,
            anchor=datetime.fromisoformat(data["anchor"]) if data.get("anchor") else None,
            timezone=data.get("timezone", DEFAULT_TIMEZONE),
            misfire=MisfirePolicy(data.get("misfire", DEFAULT_MISFIRE.value)),
            grace=parse_duration(data.get("grace", "1m")),
            catch_up_window=parse_duration(data.get("catch_up_window", "1d")),
            dst=(
                DstPolicy(Nonexistent(dst["nonexistent"]), Ambiguous(dst["ambiguous"]))
                if dst
                else None
            ),
            jitter=parse_duration(data.get("jitter", "0s")),
            overlap=OverlapPolicy(data.get("overlap", DEFAULT_OVERLAP.value)),
            payload_ref=data.get("payload_ref"),
            args=data.get("args"),
            exclude_dates=tuple(date.fromisoformat(d) for d in data.get("exclude_dates") or ()),
            deadline=parse_duration(data["deadline"]) if data.get("deadline") else None,
        )

    def definition_hash(self) -> str:
        """Changes exactly when the stored definition would change."""
        blob = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def rule_hash(self) -> str:
        """Changes when what decides the fire instants changes (rule, zone, DST, exclusions)."""
        data = self.to_json()
        keys = ("cron", "rrule", "every", "anchor", "timezone", "dst", "exclude_dates")
        blob = json.dumps({k: data[k] for k in keys}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class ScheduleFile:
    """A whole validated schedule file."""

    path: str
    job_types: Mapping[str, JobTypeSpec]
    schedules: Mapping[str, ScheduleSpec]
    # Without a job_types section: schedule name -> line of its job_type, which
    # must already be stored in the database (checked by ``rota apply``).
    stored_job_type_lines: Mapping[str, int] = field(default_factory=dict)
    # Job type name -> {"handler" | "reconcile" | "name": 1-based line of that value
    # (of the job type's name)}: where `rota check --import-handlers` points.
    job_type_lines: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # The ``notifications:`` section: webhook targets by name.
    notifications: Mapping[str, NotificationTarget] = field(default_factory=dict)
