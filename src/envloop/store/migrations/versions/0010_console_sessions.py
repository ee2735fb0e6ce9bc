"""Console logins become server-side sessions: the cookie holds an opaque token (stored hashed),
never the API key; a session expires, ends at logout, and ends with its key's revocation. Cookies
of earlier versions (which held the key) no longer log anyone in.

Revision ID: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("token_hash", sa.String(128), primary_key=True),
        sa.Column("api_key_id", sa.String(64), sa.ForeignKey("api_keys.id"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_console_sessions_api_key_id", "console_sessions", ["api_key_id"])
    op.create_index("ix_console_sessions_expires_at", "console_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("console_sessions")
