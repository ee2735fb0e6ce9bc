"""Write transactions that PostgreSQL aborted, run again.

Workers lock job and trial rows in no fixed order, so two of their transactions can deadlock, and a
statement can give up waiting LOCK_WAIT_SEC for a lock; PostgreSQL aborts it, and the aborted
attempt changed nothing. Every write of the queue (`envloop.store.queue`) and of its leases
(`envloop.store.leases`) goes through this one policy, which is why it is in neither of them.
"""

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

from envloop.core.retry_policy import Backoff, call_retrying_now

# PostgreSQL aborts one of two transactions that wait on each other (deadlock, serialization), and
# a statement that waited LOCK_WAIT_SEC for a lock (lock_timeout): each changed nothing.
DEADLOCK_SQLSTATES = ("40P01", "40001")
_RETRYABLE_SQLSTATES = (*DEADLOCK_SQLSTATES, "55P03")
ABORTED_BACKOFF = Backoff(base_sec=0.01, cap_sec=0.1)
"""Quick retries: the transaction that won holds its locks for milliseconds."""
_T = TypeVar("_T")


def retry_aborted(work: Callable[[], _T], sqlstates: tuple[str, ...] = _RETRYABLE_SQLSTATES) -> _T:
    """Run a write transaction again when PostgreSQL aborted it for a deadlock with another one
    (workers lock job rows in no fixed order) or, unless `sqlstates` leaves it out, a lock wait that
    timed out; the aborted attempt changed nothing."""

    def aborted(exc: BaseException) -> bool:
        return isinstance(exc, DBAPIError) and getattr(exc.orig, "sqlstate", None) in sqlstates

    return call_retrying_now(work, worth_retrying=aborted, backoff=ABORTED_BACKOFF, max_retries=7)
