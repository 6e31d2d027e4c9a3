"""Every performance figure of issue 9 in one run, each beside its same-run ceiling.

1. ``bench.bench_compare``: rota's executors at the defaults vs pgqueuer's own
   worker vs pgbench, in interleaved rounds, with PostgreSQL backend CPU and
   transactions per job; rota on SQLite at the defaults beside them.
2. ``bench.bench_enqueue``: ``enqueue_many``, ``rota enqueue``, ``POST /jobs``.
3. ``bench.bench_history``: 0 and 1 million finished jobs (``--long``: and 10
   million, and the 1-million-deep backlog), with a second empty database as
   a control, grown as a table in use grows
   (``--history loaded``: bulk-loaded), each figure as a ratio to the
   empty-table one.

Run: ``python -m bench.run_all [--quick] [--long] [--keep-history] [--skip-history]``; each part
also runs alone (``python -m bench.bench_compare --help`` and so on).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from bench import bench_compare, bench_enqueue, bench_history
from bench.bench_executor import DEFAULT_PG_URL


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run_all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one round of each and smaller counts (a smoke run, noisy)",
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help="history at 10 million rows too, and the 1M-deep backlog",
    )
    parser.add_argument("--skip-history", action="store_true")
    parser.add_argument(
        "--history",
        choices=sorted(bench_history.HISTORY_FORMS),
        default="grown",
        help="how the history is made (see bench_history)",
    )
    parser.add_argument(
        "--keep-history",
        action="store_true",
        help="keep the history databases for the next run (see bench_history)",
    )
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    rounds = "1" if args.quick else "3"
    jobs = "5000" if args.quick else "20000"
    started = time.monotonic()
    status = 0
    print("=" * 78 + "\n1. executor: rota (defaults) vs pgqueuer vs pgbench; SQLite\n" + "=" * 78)
    status |= bench_compare.main(
        ["--rounds", rounds, "--jobs", jobs, "--sqlite", "--pg-url", args.pg_url]
    )
    print("\n" + "=" * 78 + "\n2. enqueue\n" + "=" * 78)
    status |= bench_enqueue.main(
        ["--jobs", "50000" if args.quick else "200000", "--pg-url", args.pg_url]
    )
    if not args.skip_history:
        print("\n" + "=" * 78 + "\n3. history size\n" + "=" * 78)
        sizes = (
            "0,0,1000000,10000000" if args.long else ("0,100000" if args.quick else "0,0,1000000")
        )
        history = [
            "--sizes",
            sizes,
            "--rounds",
            "1" if args.quick else "3",
            "--jobs",
            jobs,
            "--history",
            args.history,
            "--pg-url",
            args.pg_url,
        ]
        if args.long:
            history.append("--backlog")
        if args.keep_history:
            history.append("--keep-history")
        status |= bench_history.main(history)
    print(f"\nall parts done in {time.monotonic() - started:,.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
