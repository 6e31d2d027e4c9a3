"""Which job types this process can run: their handlers (and reconcile hooks) import here.

In a rolling deploy, executors on the old image see job types applied for the
new one. An executor checks the job types of its pools when it starts and
whenever they are read again, and never claims those whose handler it cannot
import (``claim_jobs(excluded_types=...)``): their jobs stay QUEUED for an
executor that can. Each such type is logged once (one ``handler_unavailable``
line with the error); a type whose definition changes is tried again, so
applying a fixed handler path, or a module installed since, makes it claimable
at the next reload. A type that never changes is not imported again (importing
runs the module's top-level code). ``command:`` job types need no import.

``import_problems`` is what ``rota check --import-handlers`` runs too.
"""

from __future__ import annotations

import importlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Collection, Mapping

from rota.core.config import Isolation, JobTypeSpec
from rota.executor.errors import PermanentError
from rota.executor.handlers import HandlerRegistry
from rota.executor.processes import die_with_parent
from rota.runtime.events import emit

log = logging.getLogger("rota.executor")

MAX_ERROR_CHARS = 500
# An ``isolation: process`` handler is imported in a child of its own, as it runs:
# a module that exits, crashes or hangs at import must not take the executor with it.
CHILD_IMPORT_TIMEOUT = 30.0
_CHILD_IMPORT = (
    "import json, sys\n"
    "sys.path[:0] = json.loads(sys.argv[2])\n"
    "from rota.executor.importable import import_error\n"
    "from rota.executor.handlers import HandlerRegistry\n"
    "why = import_error(sys.argv[1], HandlerRegistry())\n"
    "if why: sys.stderr.write(why)\n"
    "sys.stderr.flush()\n"
    "import os; os._exit(1 if why else 0)\n"
)


def import_problems(spec: JobTypeSpec, registry: HandlerRegistry) -> dict[str, str]:
    """{field: why} for each of ``handler`` and ``reconcile`` that does not import."""
    problems: dict[str, str] = {}
    for field, path in (("handler", spec.handler), ("reconcile", spec.reconcile)):
        if path is None or (field == "handler" and spec.command is not None):
            continue
        if spec.isolation is Isolation.PROCESS:
            why = _import_error_in_child(path)
        else:
            why = import_error(path, registry)
        if why:
            problems[field] = why
    return problems


def import_error(path: str, registry: HandlerRegistry) -> str | None:
    """Why ``path`` does not import here, or None."""
    try:
        registry.resolve(path)
    except PermanentError as exc:  # BAD_HANDLER, HANDLER_IMPORT_ERROR, _NOT_FOUND, ...
        return _cut(str(exc))
    except BaseException as exc:  # a module that exits, or raises KeyboardInterrupt, ...
        return _cut(f"{type(exc).__name__}: {exc}")
    return None


def _import_error_in_child(path: str) -> str | None:
    """``import_error`` in a child process, as ``isolation: process`` runs the handler."""
    argv = [sys.executable, "-c", _CHILD_IMPORT, path, json.dumps(sys.path)]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CHILD_IMPORT_TIMEOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # only prctl(2) between fork and exec
        )
    except subprocess.TimeoutExpired:
        return f"importing it did not finish within {CHILD_IMPORT_TIMEOUT:g} s"
    except OSError as exc:
        return _cut(f"could not start a process to import it: {exc}")
    said = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode == 0:
        return None
    if done.returncode == 1 and said:
        return _cut(said)
    how = (
        f"killed by signal {-done.returncode}"
        if done.returncode < 0
        else f"exit status {done.returncode}"
    )
    tail = f": {said.splitlines()[-1]}" if said else ""
    return _cut(f"importing it ended its process ({how}){tail}")


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


class ImportCheck:
    """The job types of ``pools`` whose handler this process cannot import."""

    def __init__(self, registry: HandlerRegistry, pools: Collection[str]) -> None:
        self._registry = registry
        self._pools = frozenset(pools)
        self._checked: dict[str, JobTypeSpec] = {}  # the definition each verdict is for
        self._failing: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        # Types found unrunnable (or unrunnable differently) since ``take_news``.
        self._news: dict[str, tuple[JobTypeSpec, dict[str, str]]] = {}

    def take_news(self) -> list[tuple[JobTypeSpec, dict[str, str]]]:
        """The types newly found unrunnable, with their problems, once each."""
        with self._lock:
            news, self._news = list(self._news.values()), {}
        return news

    def unrunnable(self) -> frozenset[str]:
        return frozenset(self._failing)

    def update(self, specs: Mapping[str, JobTypeSpec]) -> frozenset[str]:
        """Check the types not checked yet, or changed since; returns the unrunnable ones."""
        with self._lock:
            todo = [
                s
                for s in specs.values()
                if s.pool in self._pools and self._checked.get(s.name) != s
            ]
            if todo:
                importlib.invalidate_caches()  # see modules installed since the last try
            for spec in todo:
                self._checked[spec.name] = spec
                problems = import_problems(spec, self._registry)
                before = self._failing.pop(spec.name, None)
                if problems:
                    self._failing[spec.name] = problems
                    if problems != before:  # one line per type (and per change of it)
                        self._news[spec.name] = (spec, problems)
                        fields: dict[str, object] = {}
                        for field, why in problems.items():
                            fields[field] = spec.handler if field == "handler" else spec.reconcile
                            fields["error" if field == "handler" else f"{field}_error"] = why
                        emit(
                            log,
                            "handler_unavailable",
                            logging.WARNING,
                            job_type=spec.name,
                            pool=spec.pool,
                            **fields,
                        )
                elif before is not None:
                    emit(log, "handler_available", job_type=spec.name)
            return frozenset(self._failing)
