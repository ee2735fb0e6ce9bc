"""What every phase of an `envloop/shell@1` trial reads and writes, held in one place.

A phase (the agent's, the verifier's, a step's setup) takes the trial's state and one or two
arguments of its own (the task as the phase sees it, the phase's plan), never the ten values the
state is made of. `TrialRun` (trial_run.py) is this state with the ways a trial proceeds; the phase
modules depend on the state alone, so nothing below the trial run imports it.
"""

from dataclasses import dataclass, field

from envloop.agents import Agent
from envloop.core.trajectory import TrajectoryRecorder
from envloop.core.trial import PhaseRecord, TrialSpec
from envloop.environments import Environment, EnvironmentProvider
from envloop.runners.contacted import Contacted
from envloop.tasks.model import HarborTask


@dataclass(kw_only=True)
class TrialState:
    spec: TrialSpec
    task: HarborTask
    """The trial's own copy: a multi-step trial moves it from step to step (`active_step`)."""
    agent: Agent
    provider: EnvironmentProvider
    recorder: TrajectoryRecorder
    phases: list[PhaseRecord] = field(default_factory=list)
    """Every phase's record, in the order they ran; the outcome carries them."""
    contacted: Contacted = field(default_factory=Contacted)
    """The destinations of each environment the trial opened, added as each is torn down."""
    _environment: Environment | None = field(default=None, init=False, repr=False)

    @property
    def environment(self) -> Environment:
        """The trial's environment, once the trial run has opened it."""
        if self._environment is None:
            raise RuntimeError("the trial's environment is not open")
        return self._environment
