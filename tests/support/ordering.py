"""The order the tests run in, so that ``pytest -n N`` ends when its work does.

pytest-xdist's ``worksteal`` scheduler hands each worker an equal share of the
collection, in order, and then moves the tail of a busy worker's share to an
idle one. A share holding many of the long tests (the ``slow`` ones: real
processes and signals; the soak alone takes over a minute) would keep its worker
busy long after the others ran out of work, since only the tail moves. So the
long tests are spread over the shares, the soak and the longest first, each
to the share with the least long work so far, and they run at the head of
their share (started early, never the ones moved); the other tests fill the
shares in collection order.

Weights are estimates in seconds; only their order matters much. Run serially
(no workers), there is one share: the long tests first.
"""

from __future__ import annotations

import itertools
import os

import pytest

SOAK_SECONDS = 70.0
SLOW_SECONDS = 8.0


def weight(item: pytest.Item) -> float:
    """The estimated seconds of a long test; 0 for the others."""
    if item.get_closest_marker("soak") is not None:
        return SOAK_SECONDS
    if item.get_closest_marker("slow") is not None:
        return SLOW_SECONDS
    return 0.0


def share_sizes(count: int, workers: int) -> list[int]:
    """How many tests worksteal first gives each worker, as it computes it."""
    sizes = []
    for k in range(workers):
        sizes.append(count // (workers - k))
        count -= sizes[-1]
    return sizes


def balanced(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    sizes = share_sizes(len(items), workers)
    shares: list[list[pytest.Item]] = [[] for _ in sizes]
    load = [0.0] * workers
    long = sorted((i for i in items if weight(i) > 0), key=weight, reverse=True)
    for item in long:
        room = [k for k in range(workers) if len(shares[k]) < sizes[k]]
        k = min(room, key=lambda k: load[k])
        shares[k].append(item)
        load[k] += weight(item)
    rest = iter(i for i in items if weight(i) == 0)
    for k, share in enumerate(shares):
        share.extend(itertools.islice(rest, sizes[k] - len(share)))
    return [item for share in shares for item in share]


def workers() -> int:
    """The number of pytest-xdist workers (1 when run serially)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
