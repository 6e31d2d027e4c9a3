"""Handlers that start helper programs of their own (importable by isolated children)."""

from __future__ import annotations

import subprocess
import time
from typing import Any


def spawn_then_wait(ctx: Any) -> None:
    """Start ``sleep 300`` (a helper program, as handlers do), write its pid, then wait."""
    path: str = ctx.args["file"]
    helper = subprocess.Popen(["sleep", "300"])
    with open(path + ".tmp", "w") as f:
        f.write(str(helper.pid))
    import os

    os.replace(path + ".tmp", path)
    while True:
        time.sleep(0.1)
