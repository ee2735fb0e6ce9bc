"""Cleanup that cannot be skipped: teardown runs to its end even when the trial is cancelled."""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")


async def finish_even_if_cancelled(work: Awaitable[_T]) -> _T:
    """Run cleanup to the end even when the caller is cancelled meanwhile, then re-raise the cancel."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()
