"""Dataset members keep the task features some environment does not honour (found at push), and
jobs keep whether they were submitted to leave out the tasks their environment cannot run and which
tasks they left out. Earlier members have no record (None: not examined); earlier jobs left none out.

Revision ID: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("dataset_members", sa.Column("features", sa.JSON(), nullable=True))
    op.add_column(
        "jobs",
        sa.Column("skip_unsupported", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("jobs", sa.Column("skipped", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "skipped")
    op.drop_column("jobs", "skip_unsupported")
    op.drop_column("dataset_members", "features")
