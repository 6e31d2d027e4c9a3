"""Handlers of the prefetch tests (run in-process by the executor's slots)."""

from __future__ import annotations

import os
import time
from typing import Any


def until_file(ctx: Any) -> None:
    """Note the start in args["log"], then check in until args["go"] exists; succeed."""
    with open(ctx.args["log"], "a") as f:
        f.write(f"started {ctx.job_id}\n")
    while not os.path.exists(ctx.args["go"]):
        ctx.checkpoint()
        time.sleep(0.01)


def note(ctx: Any) -> None:
    """Note the run in args["log"]."""
    with open(ctx.args["log"], "a") as f:
        f.write(f"ran {ctx.job_id}\n")
