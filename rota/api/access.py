"""Which role a request needs, by method and path: the one table of it.

Reads (GET, HEAD, OPTIONS) need ``viewer``; the operator actions listed in
``OPERATOR_ACTIONS`` (submitting a job, cancel, replay, pause, resume, trigger and
their bulk forms) need ``operator``; anything else needs ``admin``, so a route
added without a line here is an admin's until someone decides otherwise. A
future read that shows configuration or secrets goes in ``ADMIN_READS``, above
the read rule.

The routes do not check roles themselves: the gate (``rota.api.auth``) asks this
table before any route runs, so a role can never be forgotten in one of them.
"""

from __future__ import annotations

import re

from rota.api.identities import Role

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# Reads that are an admin's (none yet): (method, path pattern).
ADMIN_READS: tuple[tuple[str, re.Pattern[str]], ...] = ()

# An operator's actions: (method, path pattern). A schedule name may hold "/".
OPERATOR_ACTIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("POST", re.compile(r"/jobs")),
    ("POST", re.compile(r"/jobs(/[^/]+)?/(cancel|replay)")),  # one job, or a bulk form
    ("POST", re.compile(r"/schedules/.+/(pause|resume|trigger)")),
)


def required_role(method: str, path: str) -> Role:
    """The least role that may make ``method path``."""
    for m, pattern in ADMIN_READS:
        if m == method and pattern.fullmatch(path):
            return Role.ADMIN
    if method in READ_METHODS:
        return Role.VIEWER
    for m, pattern in OPERATOR_ACTIONS:
        if m == method and pattern.fullmatch(path):
            return Role.OPERATOR
    return Role.ADMIN
