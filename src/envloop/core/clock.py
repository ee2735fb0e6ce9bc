"""The one clock every record of a trial is stamped by: aware UTC, so phases, steps and store rows
written by different processes (a worker, a Ray node, the server) compare without a time zone."""

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)
