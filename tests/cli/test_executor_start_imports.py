"""``rota executor`` imports only what it needs to reach its first claim.

Every module on that path is start-up time of every executor process. Code
used later, or only by some job types or other commands, is imported where it
is used: the pruner (first step at the first idle moment) and the index upkeep
(first check minutes after start), made by the claim loop after its first
claim; the webhook notices (on a failure); ``command:`` and ``isolation:
process`` runs; the producer (``rota.enqueue``, loaded on first use); the API,
the schedule file and Alembic.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NOT_AT_START = (
    "rota.producer",
    "rota.executor.pruner",
    "rota.executor.reindexer",
    "rota.executor.isolation",
    "rota.executor.child",
    "rota.executor.command",
    "rota.executor.notify_delivery",
    "rota.api",
    "rota.operations",
    "rota.scheduler.schedule_file.loader",
    "multiprocessing",
    "alembic",
    "fastapi",
    "httpx",
    "yaml",
)


def test_an_executor_is_made_without_what_it_needs_only_later(tmp_path: Path) -> None:
    # A fresh interpreter: this one has imported everything already.
    probe = (
        "import sys\n"
        "from rota.cli.main import build_parser\n"
        "from rota.core.database import make_engine\n"
        "build_parser('executor')  # what `rota executor ...` imports\n"
        "from rota.executor.service import Executor\n"
        f"engine = make_engine({'sqlite:///' + str(tmp_path / 'q.db')!r})\n"
        "Executor(engine, ['default'], 2, listen=False)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({NOT_AT_START!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
