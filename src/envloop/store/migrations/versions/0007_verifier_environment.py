"""Jobs say where their verifiers run (`el job submit --verifier-environment task|separate`);
existing jobs keep `task`, where each of their tasks said.

Revision ID: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "jobs", sa.Column("verifier_environment", sa.String(20), nullable=False, server_default="task")
    )


def downgrade() -> None:
    op.drop_column("jobs", "verifier_environment")
