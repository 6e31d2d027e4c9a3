"""queue tables keep a tenth of each page free: new jobs skip the crumbs of old pages

``jobs`` and ``job_attempts`` get ``fillfactor = 90`` on PostgreSQL (SQLite has
no such setting). An insert then takes a page only while a tenth of it stays
free. Most pages of a table in use keep a crumb of free space, what vacuum
freed of their jobs' older versions; at a fill factor of 100 the free space map
offered every crumb that fits one new row, so a batch of new jobs was spread
one row to a page over thousands of old pages, each written whole to the WAL
after a checkpoint. The tenth kept free also lets a claim or an outcome put a
job's new version on the page of its old one.

The setting applies to pages filled from now on; the rows in place stay where
they are. ``ALTER TABLE ... SET (fillfactor)`` takes a SHARE UPDATE EXCLUSIVE
lock: claims, outcomes and enqueues go on while it runs.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 03:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_TABLES = ("jobs", "job_attempts")
FILL_FACTOR = 90


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _TABLES:
            op.execute(f"ALTER TABLE {table} SET (fillfactor = {FILL_FACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _TABLES:
            op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
