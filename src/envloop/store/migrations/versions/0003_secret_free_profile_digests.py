"""Profile digests no longer cover secret values: a digest anyone may read must not confirm a
guess of a secret. Stored digests are recomputed from the non-secret params and the secret names,
which the profiles table holds already (the formula of `envloop.services.profiles._digest`, frozen
here as it was when this migration was written).

Revision ID: 0003
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_profiles = sa.table(
    "profiles",
    sa.column("id", sa.String),
    sa.column("params", sa.JSON),
    sa.column("secret_names", sa.JSON),
    sa.column("content_digest", sa.String),
)


def _digest(params: dict[str, str], secret_names: list[str]) -> str:
    public = {k: v for k, v in params.items() if k not in secret_names}
    canonical = json.dumps({"params": public, "secret": sorted(secret_names)}, sort_keys=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(_profiles.c.id, _profiles.c.params, _profiles.c.secret_names)).all()
    for profile_id, params, secret_names in rows:
        conn.execute(
            _profiles.update()
            .where(_profiles.c.id == profile_id)
            .values(content_digest=_digest(dict(params), list(secret_names)))
        )


def downgrade() -> None:
    """The old digests covered secret values, which are encrypted now: they cannot be rebuilt, and
    the new ones stay (they only identify content, nothing reads them back)."""
