"""``async def`` handlers: one event loop per executor, in a thread of its own.

A handler (or reconcile hook) that returns an awaitable, which is what calling
an ``async def`` function does, has it run as a task on the executor's event
loop, started on first use. The worker slot that called the handler waits for
the task, so a coroutine handler takes a slot like any other, and the same
context, timeout, cancellation and outcomes apply:

* ``ctx.checkpoint()`` and ``ctx.progress()`` work as in a plain function;
* when the attempt times out, is released at shutdown or loses its lease, the
  task is cancelled at once (``CancelledError`` at its current ``await``);
* when a cancellation is requested, the handler first has
  ``CANCEL_GRACE_SECONDS`` to notice it at a ``ctx.checkpoint()`` (which raises
  ``JobCancelled``, as in a plain function); a task still running then is
  cancelled. Either way the job ends CANCELLED;
* the slot is freed when the task has really ended, after its cleanup.

All coroutine handlers of the process share the loop: a handler that blocks
it (``time.sleep`` instead of ``await asyncio.sleep``, CPU-bound work) stalls
the others; run such work in a plain function, or ``await
asyncio.to_thread(...)``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

_POLL_SECONDS = 0.02
CANCEL_GRACE_SECONDS = 2.0


class TaskStopped(Exception):
    """The task was cancelled because the job had to stop (the caller knows why)."""


class EventLoopThread:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=serve, name="rota-asyncio", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(
        self,
        awaitable: Awaitable[Any],
        stop_now: Callable[[], bool],
        stop_soon: Callable[[], bool],
    ) -> Any:
        """Run ``awaitable`` on the loop and wait for it.

        The task is cancelled once ``stop_now()`` is true, or
        ``CANCEL_GRACE_SECONDS`` after ``stop_soon()`` became true. Returns its
        result or raises its exception; raises ``TaskStopped`` when it ended
        cancelled after we cancelled it.
        """
        loop = self._started()
        ended = threading.Event()
        box: dict[str, asyncio.Future[Any]] = {}

        def start() -> None:
            task = asyncio.ensure_future(_awaited(awaitable))
            box["task"] = task
            task.add_done_callback(lambda _t: ended.set())

        def cancel() -> None:
            task = box.get("task")
            if task is not None:
                task.cancel()

        loop.call_soon_threadsafe(start)
        cancel_sent = False
        soon_since: float | None = None
        while not ended.wait(_POLL_SECONDS):
            if not self._alive(loop):
                raise RuntimeError("the executor's event loop stopped")
            if cancel_sent:
                continue
            now = time.monotonic()
            if soon_since is None and stop_soon():
                soon_since = now
            if stop_now() or (soon_since is not None and now - soon_since >= CANCEL_GRACE_SECONDS):
                cancel_sent = True
                loop.call_soon_threadsafe(cancel)
        task = box["task"]
        if task.cancelled():
            if cancel_sent:
                raise TaskStopped()
            raise asyncio.CancelledError("the handler's task was cancelled")
        result = task.result()
        if isinstance(result, _Raised):
            raise result.exc
        return result.value

    def _alive(self, loop: asyncio.AbstractEventLoop) -> bool:
        thread = self._thread
        return self._loop is loop and thread is not None and thread.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        """Cancel what still runs on the loop, stop it and close it."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        def shut() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.call_later(min(timeout, 0.5), loop.stop)

        loop.call_soon_threadsafe(shut)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Raised:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


async def _awaited(awaitable: Awaitable[Any]) -> _Returned | _Raised:
    """Await, carrying any exception out as a value.

    asyncio re-raises SystemExit and KeyboardInterrupt out of the loop itself,
    which would end the loop thread and every task on it: a handler raising
    them must fail its own job only, like a plain function's.
    """
    try:
        return _Returned(await awaitable)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the handler's, whatever it is: its job's outcome
        return _Raised(exc)
