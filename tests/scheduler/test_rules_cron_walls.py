"""The cron walk agrees with cronsim's (Vixie cron's semantics), wall time for wall time.

``walls_from`` is what the DST layer reads around a transition and
``first_from`` what it reads everywhere else; both are checked here on naive
wall times, where no DST policy applies, over seeded random expressions.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from itertools import islice

import pytest
from cronsim import CronSim, CronSimError

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
_SPECIAL_DAYS = ["L", "LW", "1,L", "15,LW"]
_SPECIAL_WEEKDAYS = ["5L", "1#2", "0#5", "7L", "MON#1,FRI", "6#3,2L"]


def _field(rng: random.Random, lo: int, hi: int) -> str:
    kind = rng.choice(["*", "*", "n", "list", "range", "step", "rangestep", "startstep"])
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
    if kind == "startstep":
        return f"{a}/{rng.randint(1, 5)}"
    return f"{a}-{b}/{rng.randint(1, 5)}"


def _expression(rng: random.Random) -> str:
    six = rng.random() < 0.3
    fields = [_field(rng, lo, hi) for lo, hi in (_FIELDS if six else _FIELDS[1:])]
    if rng.random() < 0.15:
        fields[-3] = rng.choice(_SPECIAL_DAYS)
    if rng.random() < 0.15:
        fields[-1] = rng.choice(_SPECIAL_WEEKDAYS)
    return " ".join(fields)


@pytest.mark.parametrize("seed", range(200))
def test_walk_matches_cronsim(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        text = _expression(rng)
        try:
            walls = CronWalls(parse_cron(text))
        except RuleError:  # never matches (the 31st of February)
            with pytest.raises(CronSimError):
                CronSim(text, datetime(2024, 1, 1))  # noqa: DTZ001 - wall time
            continue
        start = datetime(2024, 1, 1) + timedelta(  # noqa: DTZ001 - wall time
            seconds=rng.randrange(3 * 366 * 86400)
        )
        horizon = start + timedelta(days=366 * 50)
        ours = []
        for wall in walls.walls_from(start, horizon):
            ours.append(wall)
            if len(ours) == 6:
                break
        reference = CronSim(text, start - timedelta(seconds=1))
        assert ours == list(islice(reference, 6)), (text, start)
        if not ours:  # nothing within 50 years (cronsim's horizon)
            continue
        assert walls.first_from(start, horizon) == ours[0], (text, start)
        assert walls.first_from(start, ours[0]) == ours[0], (text, start)
        assert walls.first_from(start, ours[0] - timedelta(seconds=1)) is None, (text, start)
