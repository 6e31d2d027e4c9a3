"""The executor's worker identity: fresh per process start (see ``shared.identity``)."""

from __future__ import annotations

from rota.shared.identity import new_worker_id

__all__ = ["new_worker_id"]
