"""A fresh identity for every process start: ``host:pid:random``.

A reused identity (a restarted pod with the same name) could otherwise look
like the owner of leases its previous life held, or like the same entry in the
worker registry; the random part prevents it. Executors and scheduler replicas
both take theirs from here.
"""

from __future__ import annotations

import os
import secrets
import socket


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
