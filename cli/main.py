"""``rota``: the entry point. Each command lives in ``cli.commands.<name>``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from sqlalchemy.exc import SQLAlchemyError

from cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    BadScheduleFile,
    RuntimeFailure,
    UserError,
)
from shared.database import DatabaseError

# Each module has register(subparsers) and run(args) -> int.
COMMANDS = (
    "migrate",
    "enqueue",
    "jobs",
    "job",
    "executor",
    "cancel",
    "replay",
    "apply",
    "scheduler",
    "schedules",
    "pause",
    "resume",
    "trigger",
    "backfill",
    "check",
    "preview",
    "run",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``only`` (imports just that command's module)."""
    parser = argparse.ArgumentParser(
        prog="rota", description="A scheduler service for recurring background jobs."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"cli.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Handlers are named by import path ("myapp.reports:generate"): like a plain
    # `python` run, resolve them from the working directory too.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    words = sys.argv[1:] if argv is None else argv
    # `rota COMMAND ...` imports only that command (a faster start: `rota
    # executor` needs no Alembic, no rule engine); anything else (`rota --help`,
    # a typo) gets the parser of every command, with its listing and errors.
    chosen = words[0] if words and words[0] in COMMANDS else None
    parser = build_parser(chosen)
    args = parser.parse_args(words)
    try:
        code: int = args.func(args)
    except BadScheduleFile as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        print("rota: the schedule file was refused; nothing was applied", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UserError as exc:
        print(f"rota: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (RuntimeFailure, DatabaseError) as exc:
        print(f"rota: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OverflowError as exc:  # an instant near year 1 or 9999, given by a person
        print(f"rota: a date is out of the range rota can compute with: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SQLAlchemyError as exc:  # the database refused: say what it said, no traceback
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        print(f"rota: database error: {reason}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
