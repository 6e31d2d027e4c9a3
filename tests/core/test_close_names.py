"""The names an operator may have meant, at a bounded cost whatever the name."""

from __future__ import annotations

import random
import string
import time

from rota.core.names import COMPARED_CHARS, MAX_CANDIDATES, close_names
from rota.operations.schedules import UnknownSchedule


def test_a_typo_gets_the_names_it_is_close_to() -> None:
    known = ["invoice.send", "invoice.void", "report.nightly"]
    assert close_names("invoice.sned", known) == ["invoice.send", "invoice.void"]
    assert close_names("zzz", known) == []
    # Long names are compared by their first characters, and come back whole.
    long = "reports." + "x" * 150
    assert close_names("reprts." + "x" * 150, [long, "other"]) == [long]


def test_a_hostile_name_against_thousands_of_long_ones_is_answered_at_once() -> None:
    """A 196-character name built of the same few letters as 5,000 stored names of 185
    (every pair passes difflib's quick filters) took 11-15 s to answer."""
    rng = random.Random(1)
    letters = string.ascii_lowercase[:6]
    known = ["".join(rng.choice(letters) for _ in range(185)) for _ in range(5_000)]
    name = "".join(rng.choice(letters) for _ in range(196))
    started = time.process_time()
    UnknownSchedule(name, known)
    close_names(name, known)
    assert time.process_time() - started < 2.0
    assert COMPARED_CHARS < 185 and MAX_CANDIDATES < 5_000
    assert close_names("a", ["a"] * (MAX_CANDIDATES + 1)) == []  # too many to compare
