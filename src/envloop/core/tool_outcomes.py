"""How each tool call of a trajectory ended, in one vocabulary for the trace viewer and the job's
tool usage: it ran (exit 0), exited non-zero, timed out, was cut off, or could not run at all.

A call still running when the agent's phase ended is recorded with an error ("interrupted") and no
exit code. It did run, so it is not "could not run": when the agent's time limit ended the phase
(the trajectory stopped by `timeout`) it timed out, like a command that ran past its own limit;
otherwise (a cancelled job) it was cut off.
"""

from typing import Literal

from envloop.core.trajectory import ToolStep, Trajectory

ToolOutcome = Literal["ran", "nonzero_exit", "timed_out", "cut_off", "could_not_run"]


def tool_outcomes(trajectory: Trajectory) -> dict[int, ToolOutcome]:
    """Each tool step's outcome, by step index."""
    tools = [step for step in trajectory.steps if isinstance(step, ToolStep)]
    last = tools[-1].index if tools else None
    found: dict[int, ToolOutcome] = {}
    for step in tools:
        found[step.index] = _outcome(step, step.index == last, trajectory.stop_reason == "timeout")
    return found


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
