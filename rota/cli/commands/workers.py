"""``rota workers [--json]``: the scheduler and executor processes, live or gone.

A process refreshes its row once per interval (10 s by default); one silent
for three intervals is shown as gone (killed, frozen, or cut off from the
database). A graceful exit removes the row; gone rows are removed after a day.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rota.cli.common import EXIT_OK, add_db_option, open_database
from rota.core.queries.workers import WorkerRow, list_workers


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "workers",
        help="list scheduler and executor processes (live or gone)",
        description=(
            "List the scheduler and executor processes registered in the database: "
            "live, or gone (silent for three of their refresh intervals)."
        ),
    )
    p.add_argument("--json", action="store_true", help="print a JSON list")
    add_db_option(p)
    p.set_defaults(func=run)


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _table(rows: list[WorkerRow]) -> str:
    header = ("STATUS", "KIND", "WORKER", "PID", "VERSION", "POOLS", "CONC", "STARTED", "SEEN")
    lines = [header]
    for w in rows:
        lines.append(
            (
                "live" if w.live else "gone",
                w.kind.value,
                w.worker_id,
                str(w.pid),
                w.version,
                "-" if w.pools is None else ",".join(w.pools),
                "-" if w.concurrency is None else str(w.concurrency),
                w.started_at.strftime("%Y-%m-%d %H:%M:%SZ"),
                _ago(w.seen_seconds_ago),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [
        "  ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)).rstrip() for line in lines
    ]
    live = sum(1 for w in rows if w.live)
    out.append(f"{live} live, {len(rows) - live} gone")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine, engine.connect() as conn:
        rows = list_workers(conn)
    if args.json:
        print(json.dumps([w.to_json() for w in rows], indent=2))
    else:
        print(_table(rows))
    return EXIT_OK
