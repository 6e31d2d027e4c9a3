"""The names an operator may have meant: close matches for a name stored nowhere.

``difflib`` compares the name with each candidate at a cost that grows with the
product of their lengths, and a name built of the letters of the stored ones
passes its quick filters every time: a 196-character name against 5,000 stored
names of 185 characters took 11-15 s to answer. A hint is a courtesy, never
worth that: only the first ``COMPARED_CHARS`` characters of each are compared,
and beyond ``MAX_CANDIDATES`` candidates none is offered.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

COMPARED_CHARS = 64
MAX_CANDIDATES = 2_000


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``known`` close to ``name``, closest first; none beyond the bound."""
    candidates = list(known)
    if len(candidates) > MAX_CANDIDATES:
        return []
    by_head: dict[str, list[str]] = {}
    for candidate in candidates:
        by_head.setdefault(candidate[:COMPARED_CHARS], []).append(candidate)
    heads = difflib.get_close_matches(name[:COMPARED_CHARS], list(by_head), n=n, cutoff=0.6)
    return [full for head in heads for full in by_head[head]][:n]
