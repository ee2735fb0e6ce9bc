"""The Runner protocol: the versioned harness that takes one TrialSpec from setup to teardown.

A runner declares the profile params it reads as a pydantic model (`params_model`), and says which
components read the rest (`param_readers`: the shell runner's agent), so submission can refuse a
profile whose values do not fit and warn about params no component reads (`runners.params`).
"""

from collections.abc import Mapping
from typing import Protocol

from pydantic import BaseModel

from envloop.core.params import ParamReader
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.wire.runners import ComponentInfo, Origin, RunnerInfo, TaskKind

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["ComponentInfo", "Origin", "RunnerInfo", "TaskKind"]


class Runner(Protocol):
    ref: str
    task_kind: TaskKind
    description: str

    @property
    def params_model(self) -> type[BaseModel]:
        """The profile params the runner itself reads."""
        ...

    def param_readers(self, params: Mapping[str, str]) -> list[ParamReader]:
        """Who reads these params, the runner itself first; ComponentError when they name a
        component (an agent) that is not installed here."""
        ...

    def components(self) -> list[ComponentInfo]:
        """The components it hosts, for `el runner show` (the shell runner's agents); may be empty."""
        ...

    async def run(self, spec: TrialSpec) -> TrialOutcome:
        """Never raises for a trial's own failures; only cancellation propagates."""
        ...
