"""``rota migrate``: create or upgrade the schema (idempotent)."""

from __future__ import annotations

import argparse
from typing import Any

from rota.cli.common import UserError, add_db_option, open_database
from rota.core.database import display_url, schema_of
from rota.migrations.check import migration_refusal
from rota.migrations.runner import current_revision, head_revision, upgrade


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "migrate", help="create or upgrade the schema"
    )
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_database(args, migrated=False) as engine:
        where = display_url(engine.url)
        schema = schema_of(engine.url)
        if schema is not None:
            where += f" schema {schema}"
        before = current_revision(engine)
        refusal = migration_refusal(before)
        if refusal is not None:  # a revision no migration here leads from: nothing done
            raise UserError(f"the database {where} {refusal}")
        upgrade(engine)
        head = head_revision()
        if before == head:
            print(f"{where}: schema already at {head}")
        else:
            print(f"{where}: schema upgraded from {before or 'nothing'} to {head}")
    return 0
