"""Jobs get a name and a note (`el job submit --name --note`), shown beside their IDs; existing jobs
have neither. Two tables of derived facts, filled when first read: what each task asks, expects and
is labelled with (by content digest), and each finished trial's answer, tokens and duration, so a
job's samples are searched, sorted and paged, and its results broken down, in the store.

Revision ID: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("name", sa.String(200), nullable=True))
    op.add_column("jobs", sa.Column("note", sa.Text(), nullable=True))
    op.create_table(
        "task_facts",
        sa.Column("digest", sa.String(80), primary_key=True),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
    )
    op.create_table(
        "trial_samples",
        sa.Column("trial_id", sa.String(64), sa.ForeignKey("trials.id"), primary_key=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=True),
        sa.Column("duration_sec", sa.Float(), nullable=True),
    )
    op.create_index("ix_trial_samples_job_id", "trial_samples", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_trial_samples_job_id", table_name="trial_samples")
    op.drop_table("trial_samples")
    op.drop_table("task_facts")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("note")
        batch.drop_column("name")
