"""Whether each task of a dataset is fit to be scored: the verdict a benchmark's maintainer reads
before anyone reports a number on it (`el dataset check`).

A task is healthy when its reference solution passes in every run, doing nothing scores 0, and the
verifier gives the same verdict to the same final state each time: in each of the oracle's runs the
verifier judges the final state several times over (`runners.verifier_runs`), and a run whose
verdicts differ is flagged. A flaky verifier's rewards say nothing of the oracle or of doing
nothing, so a task whose verifier is flaky is named for that alone. The oracle's runs may end in
different states (a solution that depends on timing or the network), so rewards that differ across
them are the oracle's failures, not the verifier's.
"""

from pydantic import BaseModel, ConfigDict, Field


class CheckedRun(BaseModel):
    """One trial of the check: its reward, or why it has none, and how long its phases took."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    reward: float | None
    error: str | None = None
    pending: bool = False
    phases: dict[str, float] = Field(default_factory=dict, description="seconds of each phase's longest run")
    flaky: str | None = Field(
        default=None, description="the verdicts the verifier gave this run's final state"
    )


class TaskHealth(BaseModel):
    model_config = ConfigDict(frozen=True)

    task: str
    healthy: bool
    problems: list[str] = Field(description="each problem named; empty when healthy (or still running)")
    pending: bool = Field(description="a run still to end: the verdict is not final")
    oracle: list[float | None] = Field(description="the oracle's reward in each run (null: none)")
    nop: list[float | None] = Field(description="the nop agent's reward in each run (null: none)")
    setup_sec: float | None = Field(description="longest environment start (a docker image build included)")
    oracle_sec: float | None = Field(description="longest oracle run")
    verifier_sec: float | None = Field(description="longest verifier run")


def task_health(
    task: str, oracle: list[CheckedRun], nop: list[CheckedRun], unsupported: str | None = None
) -> TaskHealth:
    """The verdict on one task from its oracle and nop runs (or the reason the job left it out)."""
    problems: list[str] = []
    if unsupported is not None:
        problems.append(unsupported)
    runs = oracle + nop
    unscored = [run for run in runs if run.reward is None and not run.pending]
    if unscored:
        problems.append(f"no verdict in {len(unscored)} of {len(runs)} runs: {_first_error(unscored)}")
    flaky = next((run for run in oracle if run.flaky), None)
    if flaky is not None:
        problems.append(f"verifier flaky: {flaky.flaky} (the oracle's attempt {flaky.attempt})")
    else:
        problems += _oracle_and_nop(oracle, nop)
    pending = any(run.pending for run in runs)
    return TaskHealth(
        task=task,
        healthy=not problems and not pending and unsupported is None and bool(oracle),
        problems=problems,
        pending=pending,
        oracle=[run.reward for run in oracle],
        nop=[run.reward for run in nop],
        setup_sec=_longest(runs, "setup"),
        oracle_sec=_longest(oracle, "agent"),
        verifier_sec=_longest(runs, "verifier"),
    )


def _oracle_and_nop(oracle: list[CheckedRun], nop: list[CheckedRun]) -> list[str]:
    problems = []
    rewards = [run.reward for run in oracle if run.reward is not None]
    failed = [reward for reward in rewards if reward < 1.0]
    if failed and len(set(rewards)) == 1:
        problems.append(f"oracle fails: reward {rewards[0]:g} in all {len(rewards)} runs")
    elif failed:
        said = ", ".join(f"{reward:g}" for reward in rewards)
        problems.append(f"oracle fails in {len(failed)} of {len(rewards)} runs: rewards {said}")
    passed = [run.reward for run in nop if run.reward is not None and run.reward > 0]
    if passed:
        problems.append(
            f"nop passes: doing nothing scored {max(passed):g} in {len(passed)} of {len(nop)} runs"
        )
    return problems


def _first_error(runs: list[CheckedRun]) -> str:
    return next((run.error for run in runs if run.error), "no reward written")


def _longest(runs: list[CheckedRun], phase: str) -> float | None:
    seconds = [run.phases[phase] for run in runs if phase in run.phases]
    return max(seconds) if seconds else None


class DatasetHealth(BaseModel):
    """A dataset check: the job that ran it and the verdict on every task."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    dataset: str
    environment: str | None
    attempts: int
    verifier_runs: int = Field(
        default=1, description="how many times the verifier judged each oracle final state"
    )
    status: str = Field(description="the check job's status")
    finished: bool
    healthy: bool = Field(description="every task healthy (false while a run is still to end)")
    tasks: list[TaskHealth]
