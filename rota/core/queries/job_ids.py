"""Finding a job by its id or by a unique prefix of it (at least 8 hex digits).

Operators copy ids from ``rota jobs``; a prefix like ``3f2a9c1e`` is enough
when only one job's id starts with it. The lookup is a range scan of the
primary key on both backends, never a cast of every row: the prefix ``p``
matches exactly the ids between ``p000...`` and ``pfff...``, and both a
PostgreSQL ``uuid`` (compared byte by byte) and SQLite's 32 hex characters
(compared as text) sort in the order of their hex digits.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Connection, select

from rota.core.tables import jobs

MIN_PREFIX = 8
_HEX = frozenset("0123456789abcdef")
_SHOWN = 5  # candidates named when a prefix is ambiguous


class JobRefError(ValueError):
    """A job reference that names no single job (bad input, whatever the front end)."""


class BadJobRef(JobRefError):
    pass


class NoSuchJob(JobRefError):
    pass


class AmbiguousJobRef(JobRefError):
    def __init__(self, ref: str, candidates: Sequence[uuid.UUID], more: bool) -> None:
        listing = ", ".join(str(c) for c in candidates) + (", ..." if more else "")
        super().__init__(
            f"job id prefix {ref!r} is ambiguous: it matches {listing}; give more digits"
        )
        self.candidates = tuple(candidates)


def prefix_bounds(ref: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The smallest and largest id starting with ``ref`` (dashes ignored, any case)."""
    text = ref.strip()
    digits = text.replace("-", "").lower()
    if len(text) > 64 or not digits or not set(digits) <= _HEX:
        raise BadJobRef(
            f"{_shown(ref)} is not a job id: give the id, or at least its first "
            f"{MIN_PREFIX} hex digits, as `rota jobs` prints it"
        )
    if len(digits) < MIN_PREFIX:
        raise BadJobRef(
            f"job id prefix {text!r} is too short: give at least {MIN_PREFIX} hex digits"
        )
    if len(digits) > 32:
        raise BadJobRef(f"{_shown(ref)} is not a job id: it has more than 32 hex digits")
    return uuid.UUID(hex=digits.ljust(32, "0")), uuid.UUID(hex=digits.ljust(32, "f"))


def job_ids_between(
    conn: Connection, low: uuid.UUID, high: uuid.UUID, limit: int
) -> list[uuid.UUID]:
    """Up to ``limit`` job ids in ``[low, high]``, in order: a primary-key range scan."""
    stmt = (
        select(jobs.c.job_id)
        .where(jobs.c.job_id >= low, jobs.c.job_id <= high)
        .order_by(jobs.c.job_id)
        .limit(limit)
    )
    return list(conn.execute(stmt).scalars())


def resolve_job_id(conn: Connection, ref: str) -> uuid.UUID:
    """The one job whose id is ``ref`` or starts with it; else a ``JobRefError`` saying why."""
    low, high = prefix_bounds(ref)
    found = job_ids_between(conn, low, high, _SHOWN + 1)
    if not found:
        shown = ref.strip()
        raise NoSuchJob(f"no job {shown}" if low == high else f"no job id starts with {shown!r}")
    if len(found) > 1:
        raise AmbiguousJobRef(ref.strip(), found[:_SHOWN], more=len(found) > _SHOWN)
    return found[0]


def _shown(value: str) -> str:
    """A hostile value, quoted and cut short for a message."""
    return repr(value if len(value) <= 80 else value[:80] + "...")
