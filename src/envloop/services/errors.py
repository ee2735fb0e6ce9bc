"""Errors a user can act on. Surfaces turn them into one clear line (CLI: exit code 2)."""


class UserError(Exception):
    """Bad input: the request is refused and nothing is changed."""


class NotFoundError(UserError):
    """An unknown reference (dataset, profile, job, trial)."""


class ConflictError(UserError):
    """The request contradicts what is stored (immutable versions, request IDs)."""
