"""The service modules that declare reads (`envloop.store.reads.query`): what the embedded store's
query cache is filled from, all at once (`envloop.store.light`). `envloop.services.context`
imports this module when the cache is filled, not before, so a command that reads one job loads
the reads of one job; a test keeps the list whole."""

from envloop.services import diagnosis, failures, job_reads, results, trial_reads, usage
from envloop.store import reads

READ_MODULES = tuple(
    module.__name__ for module in (reads, job_reads, trial_reads, results, usage, diagnosis, failures)
)
"""Every module that declares a `Query`, the store's own included."""

__all__ = ["READ_MODULES"]
