"""Trials keep their flags (kind, detail, paths): what a reader of the reward should know, such as
files the agent changed that the verifier may run, or model calls that failed. Earlier trials have
none.

Revision ID: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trials", sa.Column("flags", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    op.drop_column("trials", "flags")
