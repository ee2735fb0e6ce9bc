"""Jobs get a name and a note (`el job submit --name --note`), shown beside their IDs; existing jobs
have neither.

Revision ID: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("name", sa.String(200), nullable=True))
    op.add_column("jobs", sa.Column("note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("note")
        batch.drop_column("name")
