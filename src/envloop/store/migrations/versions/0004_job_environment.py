"""Jobs say where their trials run (`el job submit --environment local|docker|auto`); existing jobs
keep None, each worker's own choice, which was local for all of them.

Revision ID: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("environment", sa.String(20), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "environment")
