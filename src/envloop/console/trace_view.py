"""What the trace viewer shows of a trajectory besides the steps themselves: a one-line title per
step for the timeline, which tool step answered each tool call (and the reverse), and where the
grading is. Functions of a trajectory's `Outline` (from `services.trace`), reading only the steps
near the one shown."""

from dataclasses import dataclass

from envloop.core.display import format_score
from envloop.core.trajectory import (
    CutStep,
    ModelStep,
    ScoreStep,
    StateStep,
    Step,
    SystemStep,
    ToolStep,
    UserStep,
    VerifierStep,
)
from envloop.core.words import plural
from envloop.trajectories.pages import Outline

TITLE_CHARS = 100


@dataclass(frozen=True)
class StepItem:
    index: int
    kind: str
    title: str
    problem: bool
    """Something went wrong at this step: a model error, a tool that failed, no reward."""
    changes: int


def _line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:TITLE_CHARS]
    return ""


def step_item(step: Step) -> StepItem:
    problem = False
    changes = 0
    if isinstance(step, SystemStep | UserStep):
        title = _line(step.text)
    elif isinstance(step, ModelStep):
        problem = step.error is not None
        if step.error:
            title = "error: " + _line(step.error)
        elif step.tool_calls:
            title = "calls " + ", ".join(call.name for call in step.tool_calls)
            if step.text.strip():
                title += " · " + _line(step.text)
        else:
            title = _line(step.text) or "(empty answer)"
    elif isinstance(step, ToolStep):
        problem = step.error is not None or step.timed_out or step.exit_code not in (None, 0)
        title = ("$ " + _line(step.command)) if step.command else step.tool
        if step.exit_code not in (None, 0):
            title += f"  → exit {step.exit_code}"
        elif step.timed_out:
            title += "  → timed out"
        elif step.error:
            # A command cut off by the end of the agent's phase ran: it was interrupted, not refused.
            ran = step.command is not None and step.exit_code is None
            title += "  → interrupted" if ran else "  → could not run"
        changes = len(step.changes)
    elif isinstance(step, StateStep):
        changes = len(step.changes)
        title = _line(step.note or "") or f"{plural(changes, 'file')} changed"
    elif isinstance(step, ScoreStep):
        problem = step.reward is None
        title = f"{step.scorer}: reward {format_score(step.reward)}"
    elif isinstance(step, CutStep):
        problem = True
        title = f"{step.steps} step(s) not kept ({step.bytes} bytes)"
    else:
        assert isinstance(step, VerifierStep)
        problem = step.reward is None
        title = f"reward {format_score(step.reward)}" + (
            f" · {_line(step.reward_note)}" if step.reward_note else ""
        )
    return StepItem(
        index=step.index, kind=step.kind, title=title[:TITLE_CHARS], problem=problem, changes=changes
    )


NEARBY_STEPS = 64
"""How far from a step the viewer looks for the results of its calls, or for the call of a result:
results follow their call."""


def call_results(outline: Outline, step: Step) -> dict[str, ToolStep]:
    """The tool step that ran each call of a model step, by call id (the first one, should an id
    repeat), among the steps that follow it."""
    if not isinstance(step, ModelStep) or not step.tool_calls:
        return {}
    wanted = {call.id for call in step.tool_calls}
    found: dict[str, ToolStep] = {}
    for index in range(step.index + 1, min(outline.total, step.index + 1 + NEARBY_STEPS)):
        later = outline.step(index)
        if isinstance(later, ToolStep) and later.call_id in wanted:
            found.setdefault(later.call_id, later)
            if len(found) == len(wanted):
                break
    return found


def calling_step(outline: Outline, tool: ToolStep) -> int | None:
    """The model step that asked for this tool call, among the steps before it."""
    for index in range(tool.index - 1, max(-1, tool.index - 1 - NEARBY_STEPS), -1):
        step = outline.step(index)
        if isinstance(step, ModelStep) and any(call.id == tool.call_id for call in step.tool_calls):
            return index
    return None


def grading_index(outline: Outline) -> int | None:
    """The last verifier or score step (among the last few): where the grading result sits."""
    for index in range(outline.total - 1, max(-1, outline.total - 1 - NEARBY_STEPS), -1):
        if isinstance(outline.step(index), VerifierStep | ScoreStep):
            return index
    return None


TEXT_FIELDS = ("text", "reasoning", "stdout", "stderr", "expected", "answer", "explanation")


def step_text(step: Step, field: str) -> str | None:
    """A long text of a step by the name the viewer gives it: a field, or `diff-N` for a change."""
    if field.startswith("diff-") and field[5:].isdigit() and isinstance(step, ToolStep | StateStep):
        position = int(field[5:])
        return step.changes[position].diff if position < len(step.changes) else None
    if field in TEXT_FIELDS:
        value = getattr(step, field, None)
        return value if isinstance(value, str) else None
    return None
