"""Finding a job type's handler: ``module:function`` imports, cached per process."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from rota.executor.errors import PermanentError

Handler = Callable[[Any], Any]


class HandlerRegistry:
    def __init__(self) -> None:
        self._cache: dict[str, Handler] = {}
        self._lock = threading.Lock()

    def resolve(self, path: str) -> Handler:
        found = self._cache.get(path)
        if found is not None:
            return found
        with self._lock:
            found = self._cache.get(path)
            if found is None:
                found = _import(path)
                self._cache[path] = found
        return found


def _import(path: str) -> Handler:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise PermanentError("BAD_HANDLER", f"handler {path!r} is not module:function")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of the user's module
        why = f"cannot import {module_name}: {exc!r}"
        raise PermanentError("HANDLER_IMPORT_ERROR", why) from exc
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise PermanentError("HANDLER_NOT_FOUND", f"{module_name} has no {attr}")
    if not callable(target):
        raise PermanentError("HANDLER_NOT_CALLABLE", f"{path} is not callable")
    handler: Handler = target
    return handler
