"""What every command shares: the ``--db`` option, opening the database, exit codes.

Exit codes: 0 success, 2 bad input (a message says what and where), 1 a runtime
failure. A user mistake never prints a traceback: commands raise ``UserError``
(exit 2) or ``RuntimeFailure`` (exit 1) and ``cli.main`` prints the message.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from rota.cli import bounds
from rota.core.database import (
    DEFAULT_POOL,
    BadDatabaseSetting,
    DatabaseError,
    EnginePool,
    make_engine,
    parse_url,
    resolve_schema,
    resolve_url,
    sqlite_file_path,
)
from rota.core.operator_notes import ActionNote, check_note_text
from rota.runtime.events import emit
from rota.runtime.logcontext import JobContextFilter
from rota.runtime.logformat import JsonFormatter, TextFormatter
from rota.runtime.registry import DEFAULT_INTERVAL_SECONDS

if TYPE_CHECKING:
    from rota.cli.health import HealthServer

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input: exit 2 with this message."""


class RuntimeFailure(Exception):
    """Something failed at run time: exit 1 with this message."""


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db URL`` and ``--schema NAME``: every command takes both."""
    parser.add_argument(
        "--db",
        metavar="URL",
        help="database URL (default: $ROTA_DATABASE_URL, else sqlite:///rota.db)",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        help="PostgreSQL: keep rota's tables in this schema (default: $ROTA_SCHEMA, "
        "else the server's search_path)",
    )


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="apply this schedule file first (like `rota apply FILE`)"
    )


def add_note_options(parser: argparse.ArgumentParser) -> None:
    """``--reason`` and ``--actor``: every command that acts takes both (``operator_note``)."""
    parser.add_argument(
        "--reason",
        metavar="TEXT",
        help="why (kept with the actor and the time; shown by `rota audit` and `rota job`)",
    )
    parser.add_argument(
        "--actor",
        metavar="NAME",
        help="who acts, as the audit records it (default: your OS user at this host, "
        "like alice@host)",
    )


def os_user() -> str:
    """Who runs this command: the login name ($LOGNAME, $USER...), else the account's name
    in the password database, else the numeric user id (a container with neither)."""
    import getpass  # here: only operator commands ask (it imports termios)

    candidates: list[Callable[[], str]] = [getpass.getuser]
    if hasattr(os, "getuid"):
        import pwd  # POSIX only

        candidates.append(lambda: pwd.getpwuid(os.getuid()).pw_name)
    for candidate in candidates:
        try:
            return ActionNote.of(candidate()).actor
        except (OSError, KeyError, ValueError):  # unset, unknown, or unprintable
            continue
    return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown user"


def os_actor() -> str:
    """``user@host``: the same login name on two machines is two people, or at least
    two places to look. The user alone when the host name cannot be kept."""
    user = os_user()
    try:
        return ActionNote.of(f"{user}@{socket.gethostname()}").actor
    except (OSError, ValueError):  # no host name, or one too long or unprintable
        return user


def operator_note(args: argparse.Namespace) -> ActionNote:
    """``--actor`` (else ``os_actor()``) and ``--reason``, checked: a value that cannot
    be kept is exit 2, before anything is done."""
    actor = getattr(args, "actor", None)
    if actor is not None:
        try:
            ActionNote.of(actor)
        except ValueError as exc:
            raise UserError(f"--actor: {exc}") from None
    try:
        return ActionNote.of(os_actor() if actor is None else actor, getattr(args, "reason", None))
    except ValueError as exc:
        raise UserError(f"--reason: {exc}") from None


def checked_arg(option: str, value: str, max_chars: int = 200) -> str:
    """A name from the command line, refused (exit 2) when no row could ever hold it."""
    try:
        return check_note_text(option, value, max_chars)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def database_url(args: argparse.Namespace) -> str:
    """The database URL this command uses (``--db``, then ``$ROTA_DATABASE_URL``)."""
    return resolve_url(getattr(args, "db", None))


def connect(args: argparse.Namespace, *, pool: EnginePool = DEFAULT_POOL) -> Engine:
    """An engine on ``--db`` / ``--schema``; a wrong URL or schema is bad input (exit 2)."""
    try:
        return make_engine(
            database_url(args),
            pool_size=pool.size,
            max_overflow=pool.overflow,
            schema=resolve_schema(getattr(args, "schema", None)),
        )
    except BadDatabaseSetting as exc:
        raise UserError(str(exc)) from None


@contextmanager
def open_database(
    args: argparse.Namespace, *, migrated: bool = True, pool: EnginePool = DEFAULT_POOL
) -> Iterator[Engine]:
    """An engine on ``--db``; refuses an unmigrated database unless ``migrated=False``.

    On a migrated database, a command given ``--config FILE`` applies that file
    first (printing what changed to stderr); a bad file raises ``ConfigError``,
    which ``rota.cli.main`` reports line by line.
    """
    if migrated:
        _refuse_missing_sqlite_file(database_url(args))
    engine = connect(args, pool=pool)
    try:
        if migrated:
            from rota.migrations.check import ensure_migrated

            try:
                ensure_migrated(engine)
            except DatabaseError as exc:
                raise RuntimeFailure(str(exc)) from None
            if getattr(args, "config", None):
                from rota.scheduler.apply import apply_file  # only when a file is given

                report_applied(apply_file(engine, args.config).render())
        yield engine
    finally:
        engine.dispose()


def _refuse_missing_sqlite_file(url: str) -> None:
    """Only `rota migrate` (and `rota run`) create the database file, never a read."""
    try:
        parsed = parse_url(url)
    except BadDatabaseSetting as exc:
        raise UserError(str(exc)) from None
    path = sqlite_file_path(parsed)
    is_file = parsed.get_backend_name() == "sqlite" and path and path != ":memory:"
    if is_file and not os.path.exists(str(path)):
        raise RuntimeFailure(f"no database at {path}: run `rota migrate` first")


def install_stop_handlers(stop: threading.Event, hurry: threading.Event | None = None) -> None:
    """SIGTERM and SIGINT set ``stop``: long-running commands finish cleanly.

    A second SIGTERM or SIGINT sets ``hurry``: the executor ends its drain at once.
    """

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        if stop.is_set() and hurry is not None:
            hurry.set()
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)


LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
log = logging.getLogger("rota.cli")


def add_logging_options(parser: argparse.ArgumentParser) -> None:
    """``--log-format``, ``--log-level`` and ``-v``: every long-running command takes them.

    Call ``configure_logging(args)`` first thing in the command's ``run``.
    """
    parser.add_argument(
        "--log-format",
        type=str.lower,
        choices=LOG_FORMATS,
        help="text (local time with its offset, key=value) or json (one object per line, "
        "UTC); default: $ROTA_LOG_FORMAT, else text",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help="default: $ROTA_LOG_LEVEL, else INFO (failures, retries, cancels and a summary "
        "every 10 s; DEBUG adds a line per claim and success)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def configure_logging(args: argparse.Namespace) -> None:
    """Log to stderr in the chosen format, one line per record, with handlers' job fields."""
    fmt = _choice(
        "--log-format", getattr(args, "log_format", None), "ROTA_LOG_FORMAT", LOG_FORMATS, "text"
    )
    level = _choice(
        "--log-level", getattr(args, "log_level", None), "ROTA_LOG_LEVEL", LOG_LEVELS, "INFO"
    )
    if getattr(args, "verbose", False):
        level = "DEBUG"
    install_log_handler(fmt, getattr(logging, level))


def _choice(
    option: str, given: str | None, env: str, allowed: tuple[str, ...], default: str
) -> str:
    """The option's value, else the environment's (checked like the option), else the default."""
    if given:
        return given
    value = os.environ.get(env, "").strip()
    if not value:
        return default
    value = value.upper() if allowed[0].isupper() else value.lower()
    if value not in allowed:
        raise UserError(f"${env}={value!r}: use one of {', '.join(allowed)} (or {option})")
    return value


class _StderrHandler(logging.StreamHandler[Any]):
    """Writes to whatever ``sys.stderr`` is at the time of each record (like logging's
    last-resort handler), never to a stream that was swapped out and closed since."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def install_log_handler(fmt: str = "text", level: int = logging.INFO) -> None:
    """Make rota's stderr handler the root logger's (replacing an earlier one of ours)."""
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(JobContextFilter())
    handler.rota_handler = True  # type: ignore[attr-defined]  # found again on reconfiguration
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "rota_handler", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Alembic announces each plugin it loads whenever the schema is checked: noise.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    logging.captureWarnings(True)
    threading.excepthook = _log_thread_exception


def _log_thread_exception(exc: threading.ExceptHookArgs) -> None:
    """A thread that dies of an exception says so in a log line, not a raw traceback."""
    if exc.exc_type is SystemExit:
        return
    name = exc.thread.name if exc.thread is not None else "?"
    assert exc.exc_value is not None
    log.critical("thread %s died", name, exc_info=(exc.exc_type, exc.exc_value, exc.exc_traceback))


def logs_as_json() -> bool:
    return any(
        isinstance(h.formatter, JsonFormatter)
        for h in logging.getLogger().handlers
        if getattr(h, "rota_handler", False)
    )


def report_applied(summary: str) -> None:
    """What ``--config FILE`` changed: a log event under JSON logs, else plain lines."""
    if logs_as_json():
        emit(log, "config_applied", summary=summary)
    else:
        print(summary, file=sys.stderr)


def setup_logging(verbose: bool = False, level: int = logging.INFO) -> None:
    """The text format at ``level`` (DEBUG if ``verbose``); commands use ``configure_logging``."""
    install_log_handler("text", logging.DEBUG if verbose else level)


def add_health_options(parser: argparse.ArgumentParser) -> None:
    """``--health-port``, ``--health-host`` and ``--liveness-interval``."""
    parser.add_argument(
        "--health-port",
        type=bounds.PORT,
        metavar="PORT",
        help="serve GET /healthz on this port: 503 when a loop of this process is stuck "
        "(has not come round for three liveness intervals), for a liveness probe; "
        "0 picks a free port (logged)",
    )
    parser.add_argument(
        "--health-host",
        default="0.0.0.0",
        metavar="HOST",
        help="address for --health-port (default 0.0.0.0: reachable by the probe)",
    )
    parser.add_argument(
        "--liveness-interval",
        type=bounds.LIVENESS_INTERVAL,
        default=DEFAULT_INTERVAL_SECONDS,
        metavar="SECONDS",
        help="how often this process refreshes its row in the worker registry "
        f"(`rota workers`; silent for three = gone) and how often its loops must come "
        f"round for /healthz (default {DEFAULT_INTERVAL_SECONDS:g})",
    )


@contextmanager
def health_server(args: argparse.Namespace) -> Iterator[HealthServer | None]:
    """The ``--health-port`` server while the block runs (None without the option).

    It listens at once (a busy port is a one-line runtime failure, before any
    work starts) and answers 200 until the command adds its loops with
    ``server.watch(service.liveness)``.
    """
    port = getattr(args, "health_port", None)
    if port is None:
        yield None
        return
    from rota.cli.health import HealthServer

    host = args.health_host
    try:
        server = HealthServer(host, port)
    except OSError as exc:
        raise RuntimeFailure(
            f"--health-port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    server.start()
    bound_host, bound_port = server.address
    emit(log, "health_listening", host=bound_host, port=bound_port, path="/healthz")
    try:
        yield server
    finally:
        server.close()
