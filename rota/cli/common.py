"""What every command shares: the ``--db`` option, opening the database, exit codes.

Exit codes: 0 success, 2 bad input (a message says what and where), 1 a runtime
failure. A user mistake never prints a traceback: commands raise ``UserError``
(exit 2) or ``RuntimeFailure`` (exit 1) and ``cli.main`` prints the message.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from sqlalchemy import Engine

from rota.shared.actions import ActionNote, check_note_text
from rota.shared.database import (
    BadDatabaseSetting,
    DatabaseError,
    make_engine,
    parse_url,
    resolve_schema,
    resolve_url,
)

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


def add_reason_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reason",
        metavar="TEXT",
        help="why (kept with your OS user name and the time; shown by `rota job` and "
        "`rota schedules`)",
    )


def os_user() -> str:
    """Who runs this command: the login name ($LOGNAME, $USER...), else the account's name
    in the password database, else the numeric user id (a container with neither)."""
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


def operator_note(args: argparse.Namespace) -> ActionNote:
    """The OS user and ``--reason``, checked (a reason that cannot be kept is exit 2)."""
    try:
        return ActionNote.of(os_user(), getattr(args, "reason", None))
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


def connect(args: argparse.Namespace) -> Engine:
    """An engine on ``--db`` / ``--schema``; a wrong URL or schema is bad input (exit 2)."""
    try:
        return make_engine(database_url(args), schema=resolve_schema(getattr(args, "schema", None)))
    except BadDatabaseSetting as exc:
        raise UserError(str(exc)) from None


@contextmanager
def open_database(args: argparse.Namespace, *, migrated: bool = True) -> Iterator[Engine]:
    """An engine on ``--db``; refuses an unmigrated database unless ``migrated=False``.

    On a migrated database, a command given ``--config FILE`` applies that file
    first (printing what changed to stderr); a bad file raises ``ConfigError``,
    which ``rota.cli.main`` reports line by line.
    """
    if migrated:
        _refuse_missing_sqlite_file(database_url(args))
    engine = connect(args)
    try:
        if migrated:
            from rota.migrations.runner import ensure_migrated

            try:
                ensure_migrated(engine)
            except DatabaseError as exc:
                raise RuntimeFailure(str(exc)) from None
            if getattr(args, "config", None):
                from rota.scheduler.apply import apply_file  # only when a file is given

                print(apply_file(engine, args.config).render(), file=sys.stderr)
        yield engine
    finally:
        engine.dispose()


def _refuse_missing_sqlite_file(url: str) -> None:
    """Only `rota migrate` (and `rota run`) create the database file, never a read."""
    try:
        parsed = parse_url(url)
    except BadDatabaseSetting as exc:
        raise UserError(str(exc)) from None
    path = parsed.database
    is_file = parsed.get_backend_name() == "sqlite" and path and path != ":memory:"
    if is_file and not os.path.exists(str(path)):
        raise RuntimeFailure(f"no database at {path}: run `rota migrate` first")


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop``: long-running commands finish cleanly."""

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)


def setup_logging(verbose: bool = False, level: int = logging.INFO) -> None:
    """One line per event on stderr; ``verbose`` means DEBUG whatever ``level`` says."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else level,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    # Alembic announces each plugin it loads whenever the schema is checked: noise.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
