"""The exit codes of `el`, one meaning each, so scripts and CI can act on them
(docs/reference/exit-codes.md). Every failure also prints exactly one line on standard error,
never a traceback."""

OK = 0
INTERNAL = 1
"""An unexpected error inside envloop (a bug): one line; ENVLOOP_DEBUG=1 shows the traceback."""
BAD_INPUT = 2
"""Bad input or a refused request: usage, unknown IDs, invalid files, no access, conflicts."""
JOB_NOT_COMPLETED = 3
"""`--wait` or `el job watch` followed a job that ended failed or cancelled."""
SERVER = 4
"""The server failed, answered something that is not the API's, or could not be reached (nor the store's
PostgreSQL server)."""
INTERRUPTED = 130
