"""Compiled bytecode for the processes the tests start, where none would be written.

The suite starts well over a thousand Python processes (``rota`` commands,
executors, servers, the soak's fleet). Where ``PYTHONDONTWRITEBYTECODE`` is set,
as on this project's CI machine, no ``.pyc`` of rota's own modules is ever
written, so every one of those processes compiled rota from source again: about
0.12 s of CPU each, a fifth of a command's start. The session compiles rota,
``bench`` and ``tests`` once, beside their sources as Python itself would, and
at the end removes the ``__pycache__`` folders it made, so a tree kept free of
bytecode stays so. (A ``PYTHONPYCACHEPREFIX`` cache cannot do it: under a
prefix Python looks for every module's bytecode there, the installed packages'
too, and a command's start took three times as long.)
"""

from __future__ import annotations

import compileall
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rota", "bench", "tests")


def _caches() -> set[Path]:
    return {p for package in PACKAGES for p in (ROOT / package).rglob("__pycache__")}


def compile_for_children() -> set[Path] | None:
    """Compile the packages; returns the caches to remove at the end (None: keep all)."""
    if not sys.dont_write_bytecode:
        return None  # Python writes and keeps bytecode here anyway
    before = _caches()
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1, workers=0)
    return _caches() - before


def remove(made: set[Path] | None) -> None:
    for cache in made or ():
        shutil.rmtree(cache, ignore_errors=True)
