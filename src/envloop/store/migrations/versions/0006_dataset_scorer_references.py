"""A JSONL dataset may name a plugin scorer, by its entry point name or a `module:function`
reference, which the 20 characters of the built-in names' column cannot hold.

Revision ID: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _resize(old: int, new: int) -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.alter_column(
            "scorer", type_=sa.String(new), existing_type=sa.String(old), existing_nullable=True
        )


def upgrade() -> None:
    _resize(20, 200)


def downgrade() -> None:
    _resize(200, 20)
