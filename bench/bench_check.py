"""How long `rota check` takes on large and hostile schedule files: printed, never asserted.

The target (issue 7): any file under 1 MB is checked in under 2 s, and a file
of up to 10 MB in bounded time. Each file is checked by a fresh `rota check`
process, so the figure includes the start-up an operator sees.

1. 1 MB of ordinary schedules (cron, RRULE and every: rules, each distinct).
2. 1 MB of one alias-heavy value (refused: aliases expand too far).
3. 1 MB of deeply nested lists (refused at 100 levels).
4. 10 MB of ordinary schedules.

Run: ``python -m bench.bench_check``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HEAD = "job_types:\n  work:\n    handler: app.jobs:work\nschedules:\n"


def ordinary(size: int) -> str:
    kinds = [
        'cron: "{m} {h} * * *"',
        'cron: "*/{n} * * * *"',
        'rrule: "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR={h};BYMINUTE={m}"',
        "every: {n}s",
    ]
    parts = [HEAD]
    total, i = len(HEAD), 0
    while total < size:
        rule = kinds[i % 4].format(m=i % 60, h=i % 24, n=i % 59 + 1)
        entry = f"  s{i}:\n    job_type: work\n    {rule}\n    timezone: Europe/Berlin\n"
        parts.append(entry)
        total += len(entry)
        i += 1
    return "".join(parts)


def aliases(size: int) -> str:
    lines = ["x-a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", HEAD.rstrip("\n")]
    lines += ["  s:", "    job_type: work", "    every: 1m", "    args:", "      k: ["]
    body = "\n".join(lines)
    uses = (size - len(body)) // 5
    return body + ", ".join(["*a"] * uses) + "]\n"


def nested(size: int) -> str:
    depth = (size - 200) // 2
    schedule = "  s:\n    job_type: work\n    every: 1m\n    args: {k: "
    return HEAD + schedule + "[" * depth + "]" * depth + "}\n"


def timed(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rota.cli.main", "check", str(path)],
        capture_output=True,
        check=False,
    )
    return time.perf_counter() - start, done.returncode


def main() -> None:
    cases: list[tuple[str, Callable[[int], str], int]] = [
        ("1 MB, ordinary schedules", ordinary, 1_000_000),
        ("1 MB, aliases", aliases, 1_000_000),
        ("1 MB, nested lists", nested, 1_000_000),
        ("10 MB, ordinary schedules", ordinary, 10_000_000),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for label, make, size in cases:
            path = Path(tmp) / "f.yaml"
            path.write_text(make(size))
            seconds, code = timed(path)
            print(f"{label:<28} {path.stat().st_size / 1e6:5.1f} MB  exit {code}  {seconds:6.2f} s")


if __name__ == "__main__":
    main()
