"""Trials keep the destinations they asked their egress proxy for (host, port, requests by result),
bounded. Earlier trials, and trials whose network no proxy observed, have none (null).

Revision ID: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trials", sa.Column("destinations", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("trials", "destinations")
