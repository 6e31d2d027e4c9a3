"""The plain-field cron walk agrees with croniter's own, wall time for wall time."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest

from rota.scheduler.rules.cron import CronWalls, parse_cron
from rota.scheduler.rules.occurrence import RuleError

_FIELDS = (
    (0, 59),  # second (6-field expressions only)
    (0, 59),  # minute
    (0, 23),  # hour
    (1, 31),  # day of month
    (1, 12),  # month
    (0, 7),  # day of week (0 and 7: Sunday)
)


def _field(rng: random.Random, lo: int, hi: int) -> str:
    kind = rng.choice(["*", "*", "n", "list", "range", "step", "rangestep"])
    if kind == "*":
        return "*"
    if kind == "n":
        return str(rng.randint(lo, hi))
    if kind == "list":
        return ",".join(str(v) for v in sorted(rng.sample(range(lo, hi + 1), 3)))
    a = rng.randint(lo, hi)
    b = rng.randint(a, hi)
    if kind == "range":
        return f"{a}-{b}"
    if kind == "step":
        return f"*/{rng.randint(1, max(1, (hi - lo) // 2))}"
    return f"{a}-{b}/{rng.randint(1, 5)}"


def _croniter_walls(walls: CronWalls, start: datetime, n: int) -> list[datetime]:
    it = walls.expr.iterator(start - timedelta(seconds=1))
    return [it.get_next(datetime) for _ in range(n)]


@pytest.mark.parametrize("seed", range(200))
def test_plain_walk_matches_croniter(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        six = rng.random() < 0.3
        fields = [_field(rng, lo, hi) for lo, hi in (_FIELDS if six else _FIELDS[1:])]
        try:
            expr = parse_cron(" ".join(fields))
        except RuleError:  # never matches (the 31st of February)
            continue
        assert expr.plain_fields is not None, expr.text
        walls = CronWalls(expr)
        start = datetime(2024, 1, 1) + timedelta(  # noqa: DTZ001 - wall time
            seconds=rng.randrange(3 * 366 * 86400)
        )
        horizon = start + timedelta(days=366 * 50)
        ours = []
        for wall in walls.walls_from(start, horizon):
            ours.append(wall)
            if len(ours) == 6:
                break
        assert ours == _croniter_walls(walls, start, 6), (expr.text, start)
        assert walls.first_from(start, horizon) == ours[0], (expr.text, start)
        assert walls.first_from(start, ours[0]) == ours[0], (expr.text, start)
        assert walls.first_from(start, ours[0] - timedelta(seconds=1)) is None, (expr.text, start)


@pytest.mark.parametrize("text", ["0 0 L * *", "0 0 * * 1#2", "0 0 15W * *", "0 0 L * 5"])
def test_special_days_are_walked_by_croniter(text: str) -> None:
    assert parse_cron(text).plain_fields is None
