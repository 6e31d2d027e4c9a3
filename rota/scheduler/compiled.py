"""Stored definitions, parsed and compiled once per definition hash.

A replica reads each due schedule's definition from the database on every
tick; parsing the JSON and compiling the rule is done once per distinct
``definition_hash`` and kept (bounded) for the next ticks. The occurrence a
schedule waits for is remembered too, so the next tick does not compute it
again (a miss, e.g. after another replica advanced it, just recomputes).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rota.core.config import ScheduleSpec
from rota.scheduler.misfire import OccurrenceLike
from rota.scheduler.rules import Rule, compile_rule

DEFAULT_CAPACITY = 200_000


class CompiledSchedules:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._cache: dict[str, tuple[ScheduleSpec, Rule]] = {}
        self._next: dict[tuple[str, datetime], OccurrenceLike] = {}
        self.compiled_count = 0  # definitions compiled so far (the service watches it)

    def knows(self, definition_hash: str) -> bool:
        return definition_hash in self._cache

    def get(
        self, definition_hash: str, definition: Mapping[str, Any] | None
    ) -> tuple[ScheduleSpec, Rule]:
        hit = self._cache.get(definition_hash)
        if hit is not None:
            return hit
        if definition is None:
            raise LookupError(f"definition {definition_hash} was not read")
        spec = ScheduleSpec.from_json(definition)
        compiled = (spec, compile_rule(spec))
        if len(self._cache) >= self._capacity:
            del self._cache[next(iter(self._cache))]  # the oldest
        self._cache[definition_hash] = compiled
        self.compiled_count += 1
        return compiled

    def first_due(
        self, definition_hash: str, rule: Rule, cursor_at: datetime, next_fire_at: datetime
    ) -> OccurrenceLike | None:
        """The occurrence at ``next_fire_at``: remembered from the last advance, else computed."""
        hit = self._next.pop((definition_hash, next_fire_at), None)
        return hit if hit is not None else rule.next_after(cursor_at)

    def remember_next(self, definition_hash: str, occ: OccurrenceLike | None) -> None:
        """Keep the occurrence a schedule now waits for: its next tick needs it."""
        if occ is None:
            return
        if len(self._next) >= self._capacity:
            self._next.clear()
        self._next[(definition_hash, occ.instant)] = occ
