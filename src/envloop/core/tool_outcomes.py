"""How each tool call of a trajectory ended, in one vocabulary for the trace viewer and the job's
tool usage: it ran (exit 0), exited non-zero, timed out, was cut off, or could not run at all.

A call still running when the agent's phase ended is recorded with an error ("interrupted") and no
exit code. It did run, so it is not "could not run": when the agent's time limit ended the phase
(the trajectory stopped by `timeout`) it timed out, like a command that ran past its own limit;
otherwise (a cancelled job) it was cut off.
"""

from collections.abc import Iterable, Iterator
from typing import Literal

from envloop.core.trajectory import Step, ToolStep, Trajectory

ToolOutcome = Literal["ran", "nonzero_exit", "timed_out", "cut_off", "could_not_run"]


def tool_outcomes(trajectory: Trajectory) -> dict[int, ToolOutcome]:
    """Each tool step's outcome, by step index."""
    timed_out = trajectory.stop_reason == "timeout"
    return {step.index: outcome for step, outcome in each_tool_outcome(trajectory.steps, timed_out)}


def each_tool_outcome(steps: Iterable[Step], agent_timed_out: bool) -> Iterator[tuple[ToolStep, ToolOutcome]]:
    """Each tool step with its outcome, reading the steps once (a trajectory read a page at a time):
    a step is judged when the next tool step shows it was not the last."""
    held: ToolStep | None = None
    for step in steps:
        if not isinstance(step, ToolStep):
            continue
        if held is not None:
            yield held, _outcome(held, False, agent_timed_out)
        held = step
    if held is not None:
        yield held, _outcome(held, True, agent_timed_out)


def _outcome(step: ToolStep, last: bool, agent_timed_out: bool) -> ToolOutcome:
    if step.timed_out:
        return "timed_out"
    if step.exit_code not in (None, 0):
        return "nonzero_exit"
    if step.error is not None and last and step.command is not None and step.exit_code is None:
        return "timed_out" if agent_timed_out else "cut_off"
    if step.error is not None:
        return "could_not_run"
    return "ran"
