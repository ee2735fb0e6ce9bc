"""Persistence: SQLAlchemy tables and migrations, the trial queue, and the artifact store."""
