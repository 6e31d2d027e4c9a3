"""The start-up heap, kept out of the cyclic garbage collector's passes.

A long-running process makes most of its objects while it starts: modules,
the SQLAlchemy engine and its compiled statements, the service and its
threads, about 85,000 in an executor. Every full pass of the collector then
walks all of them again, although none will become garbage. While an executor
of ``--concurrency 4`` drains short jobs the full passes came about once per
7,000 jobs and cost 0.008 ms a job, a tenth of the executor's own CPU.
``settle_heap`` collects once and freezes what is left
(``gc.freeze``), so later passes walk only what the work itself makes.
Reference counting still frees frozen objects as usual; only a reference cycle
among them is never collected, and start-up makes none that it drops later.
"""

from __future__ import annotations

import gc


def settle_heap() -> None:
    """Collect the start-up garbage, then freeze the rest: call once the service is
    built and before its loop runs, in a process of its own (not in a library's
    caller, whose heap is not ours to freeze)."""
    gc.collect()
    gc.freeze()
