"""Facts about the store's schema that both ways of opening it read (`store.db` with SQLAlchemy,
`store.light` with `sqlite3` alone), kept where importing them costs nothing."""

HEAD_REVISION = "0012"
"""The newest migration; a store at it needs none (keep equal to the last in `migrations/versions`)."""
VERSION_QUERY = "SELECT version_num FROM alembic_version"
"""Alembic's record of the revision a store is at."""
LOCK_WAIT_SEC = 5.0
"""The longest a single wait for a lock lasts (see `store.db`)."""
DEFAULT_PROJECT = "default"
SEALED_PREFIX = "fernet:"
"""How a profile secret stored encrypted begins (`store.secrets`); one that does not is plaintext."""
