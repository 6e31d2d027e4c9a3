"""The job types an executor knows, and which of its pools' types it cannot run here.

``RunnableTypes`` puts the job type cache (``job_type_cache``) and the import
check (``importable``) together: every time the types are read again, the
handlers of new or changed ones are imported, and the types whose handler
does not import are left out of the claims, and notified
(``handler_unavailable``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from rota.core.claimed import ClaimedJob
from rota.core.config import JobTypeSpec
from rota.core.database import short_error
from rota.core.notifications import NotificationEvent
from rota.executor.handlers import HandlerRegistry
from rota.executor.importable import ImportCheck
from rota.executor.job_type_cache import JobTypeCache

if TYPE_CHECKING:
    from rota.producer.notify import Notice

log = logging.getLogger("rota.executor")


class RunnableTypes:
    def __init__(self, engine: Engine, handlers: HandlerRegistry, pools: Collection[str]) -> None:
        self._engine = engine
        self._types = JobTypeCache(engine)
        self._imports = ImportCheck(handlers, pools)
        self._checked = -1  # the JobTypeCache.version last checked

    def reload(self) -> None:
        """Read the job types now and check that their handlers import (retrying changed ones)."""
        self._types.refresh()
        self._check_imports()

    def reload_if_stale(self) -> None:
        self._types.refresh_if_stale()
        self._check_imports()

    def unrunnable(self) -> frozenset[str]:
        """The types of this executor's pools whose handler does not import: never claimed."""
        return self._imports.unrunnable()

    def applied_since(self, claimed: Sequence[ClaimedJob]) -> frozenset[str]:
        """The unrunnable types, after reading any type of ``claimed`` not seen before."""
        try:
            self._types.ensure(c.job_type for c in claimed)
            self._check_imports()
        except Exception as exc:  # the jobs are claimed: the slots report what fails
            log.warning("could not read job types: %s", short_error(exc))
        return self._imports.unrunnable()

    def get(self, name: str) -> JobTypeSpec | None:
        return self._types.get(name)

    def all(self) -> dict[str, JobTypeSpec]:
        return self._types.all()

    def _check_imports(self) -> None:
        version = self._types.version
        if version != self._checked:
            self._imports.update(self._types.all())
            self._checked = version
            self._notify_unavailable()

    def _notify_unavailable(self) -> None:
        """``handler_unavailable`` for each type newly found unrunnable here.

        One notice per type, definition and error, whichever executor finds it
        first: every executor of an old image fails alike, and says it once.
        Best effort: the claims go on whatever happens to the notice.
        """
        news = self._imports.take_news()
        if not news:
            return
        from rota.producer.notify import guarded, notify_many  # only with news: not at every start

        notices = [_unavailable(spec, problems) for spec, problems in news]
        now = datetime.now(UTC)
        try:
            with self._engine.begin() as conn:
                guarded(conn, lambda c: notify_many(c, notices, now))
        except Exception as exc:  # the database is away: the claim loop reconnects
            log.warning("could not notify unavailable handlers: %s", short_error(exc))


def _unavailable(spec: JobTypeSpec, problems: dict[str, str]) -> Notice:
    from rota.producer.notify import Notice  # see _notify_unavailable

    reason = "; ".join(f"{field}: {why}" for field, why in sorted(problems.items()))
    blob = json.dumps([spec.to_json(), reason], sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode("utf-8", "replace")).hexdigest()[:32]
    return Notice(
        NotificationEvent.HANDLER_UNAVAILABLE,
        key=f"handler_unavailable:{spec.name}:{digest}",
        job_type=spec.name,
        reason=reason,
    )
