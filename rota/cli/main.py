"""``rota``: the entry point. Each command lives in ``rota.cli.commands.<name>``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from sqlalchemy.exc import SQLAlchemyError

from rota import __version__
from rota.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    RuntimeFailure,
    UserError,
    database_url,
)
from rota.core.database import BadDatabaseSetting, DatabaseError, scrub, short_error
from rota.runtime.outage import DatabaseUnusable
from rota.scheduler.schedule_file.errors import ConfigError

# Each module has register(subparsers) and run(args) -> int.
COMMANDS = (
    "migrate",
    "enqueue",
    "jobs",
    "job",
    "executor",
    "cancel",
    "replay",
    "prune",
    "apply",
    "scheduler",
    "schedules",
    "late",
    "pause",
    "resume",
    "trigger",
    "backfill",
    "check",
    "preview",
    "run",
    "serve",
    "workers",
    "audit",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``only`` (imports just that command's module)."""
    parser = argparse.ArgumentParser(
        prog="rota", description="A scheduler service for recurring background jobs."
    )
    parser.add_argument("--version", action="version", version=f"rota {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"rota.cli.commands.{name}").register(sub)
    return parser


# 128 + SIGPIPE: what a shell reports for a tool that a closed pipe stopped.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    """Run one command; a reader that stops early (``rota jobs | head -1``) ends it quietly."""
    try:
        code = _main(argv)
        # Output still buffered meets a closed pipe here, where it can be caught,
        # not in the interpreter's last flush, which prints "Exception ignored".
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _discard_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's final flush then has nowhere to fail."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _main(argv: list[str] | None) -> int:
    # Handlers are named by import path ("myapp.reports:generate"): like a plain
    # `python` run, resolve them from the working directory too. Appended, not
    # prepended: an application's own `core` or `cli` package must never
    # shadow rota's modules (they all live under the one name `rota` anyway).
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    words = sys.argv[1:] if argv is None else argv
    if words == ["--version"]:  # no need to build every command's parser for this
        print(f"rota {__version__}")
        return 0
    # `rota COMMAND ...` imports only that command (a faster start: `rota
    # executor` needs no Alembic, no rule engine); anything else (`rota --help`,
    # a typo) gets the parser of every command, with its listing and errors.
    chosen = words[0] if words and words[0] in COMMANDS else None
    parser = build_parser(chosen)
    try:
        args = _parse(parser, words)
    except SystemExit as exc:  # --help, or a usage error argparse has printed (exit 2)
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        return EXIT_BAD_INPUT
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print("rota: the schedule file was refused; nothing was applied", file=sys.stderr)
        return EXIT_BAD_INPUT
    except DatabaseUnusable:  # a permanent database fault: its one log line said why
        return EXIT_FAILURE
    except (UserError, BadDatabaseSetting) as exc:
        print(f"rota: {_safe(exc, args)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (RuntimeFailure, DatabaseError) as exc:
        print(f"rota: {_safe(exc, args)}", file=sys.stderr)
        return EXIT_FAILURE
    except OverflowError as exc:  # an instant near year 1 or 9999, given by a person
        print(f"rota: a date is out of the range rota can compute with: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SQLAlchemyError as exc:  # the database refused: say what it said, no traceback
        print(
            f"rota: database error: {scrub(short_error(exc), database_url(args))}", file=sys.stderr
        )
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
    return code


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """The parsed command line; argparse exits 2 on a mistake (each flag's range included)."""
    args, extra = parser.parse_known_args(words)
    # A command whose positionals vary in number (``rota preview [FILE] NAME``)
    # names them in ``trailing_words``: words after its options join them, as
    # argparse would do for a fixed number (``rota preview FILE --count 3 NAME``).
    trailing = getattr(args, "trailing_words", None)
    if extra and (trailing is None or any(w.startswith("-") for w in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra and trailing is not None:
        setattr(args, trailing, [*getattr(args, trailing), *extra])
    return args


def _safe(exc: BaseException, args: argparse.Namespace) -> str:
    """The message with the database password removed, whatever produced it."""
    return scrub(str(exc), database_url(args))


if __name__ == "__main__":
    sys.exit(main())
