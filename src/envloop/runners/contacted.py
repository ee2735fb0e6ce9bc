"""The destinations a trial contacted through its egress proxies, gathered from each environment
it opened (its own and any separate verifier's) for its record (core/destinations.py).

Only an environment that observes its network answers (docker, through its proxies: see
`Environment.destinations`); the local sandbox's `public` network is pasta's, with no proxy to ask,
and its trials keep no record.
"""

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

from envloop.core.destinations import Destination, Destinations, record
from envloop.environments import Environment


class Contacted:
    """The destinations of each environment a trial opened, as each is torn down."""

    def __init__(self) -> None:
        self._found: list[Destination] | None = None

    def add(self, environment: Environment) -> None:
        found = environment.destinations()
        if found is not None:
            self._found = [*(self._found or []), *found]

    @contextlib.asynccontextmanager
    async def counting(self, opening: AbstractAsyncContextManager[Environment]) -> AsyncIterator[Environment]:
        """The environment `opening` opens, whose destinations are added once it is torn down,
        however its use ends."""
        opened: Environment | None = None
        try:
            async with opening as opened:
                yield opened
        finally:
            if opened is not None:
                self.add(opened)

    def record(self) -> Destinations | None:
        """The trial's bounded record; None when no environment of it was observed."""
        return None if self._found is None else record(self._found)
