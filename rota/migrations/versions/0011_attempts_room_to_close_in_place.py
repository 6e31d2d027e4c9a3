"""job_attempts pages keep room for closing their attempts in place (PostgreSQL)

An attempt row is written when its job is claimed and rewritten once, when
the attempt ends (``ended_at``, ``outcome``). PostgreSQL writes that new
version on the same page, without touching any index (a heap-only tuple),
only when the page has room for it. Filled to the brim by the claims'
inserts, most pages have none: two of three closings write their version to
another page, found through the free space map anywhere in the table, and
add entries to both indexes. Once the table outgrows the cache, each of
those is a page read from disk. With the pages filled half by inserts, nine
closings in ten stay on their page, whose dead version the next visit
prunes.

``ALTER TABLE ... SET (fillfactor)`` takes a lock that lets reads and writes
go on, and applies to pages filled from now on; rows already written stay
where they are. SQLite has no such setting.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 10:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ATTEMPTS_FILLFACTOR = 50


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE job_attempts SET (fillfactor = {ATTEMPTS_FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE job_attempts RESET (fillfactor)")
