"""Errors a user can act on. They sit on the ground floor because every layer raises them
(settings, store, services, surfaces); surfaces turn them into one clear line (CLI: exit code 2)."""


class UserError(Exception):
    """Bad input: the request is refused and nothing is changed."""


class NotFoundError(UserError):
    """An unknown reference (dataset, profile, job, trial)."""


class ConflictError(UserError):
    """The request contradicts what is stored (immutable versions, request IDs)."""


class ServerError(RuntimeError):
    """The server failed (5xx), answered something that is not the API's, could not be reached, or
    the connection broke mid-answer: nothing the caller's input can fix (CLI: exit code 4). Raised
    by `envloop.Client`; defined here so surfaces can handle it without importing the client."""
