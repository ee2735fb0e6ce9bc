"""The verifier judging one final state several times (`VERIFIER_RUNS`, which `el dataset check`
sets on its oracle): a verifier is a function of the state the agent left, so verdicts that differ
on that one state mean a flaky verifier, and the trial is flagged `verifier-flaky` with them.

The first run is the trial's verdict, with its logs where they always are. Each later run goes
through the same `verify` as the first (its own fresh tests and log directory, or a fresh verifier
environment where the task asks for one), and keeps its captured output and logs under
`verifier-runs/N/` (`steps/NAME/verifier-runs/N/` for a step). A shared verifier's log directory
is put back as the first run left it, so the trial's kept logs are the first run's.

What a verifier run itself changes in the environment (a cache it writes) is part of the state
the next run sees: the runs judge the agent's final state as far as the verifier leaves it alone.
"""

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path

from envloop.core.reward import RewardReading
from envloop.core.trial import VERIFIER_FLAKY_FLAG, VERIFIER_RUNS_PARAM, TrialFlag
from envloop.runners.shell_phases import PhasePlan
from envloop.runners.trial_state import TrialState
from envloop.runners.verification import verify
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import verifier_mode


def verifier_runs(params: Mapping[str, str]) -> int:
    """How many times the verifier judges the final state: the param (checked at submission and
    by the runner before the trial starts), else once."""
    value = params.get(VERIFIER_RUNS_PARAM, "").strip()
    return int(value) if value else 1


def _said(reading: RewardReading) -> str:
    return "no reward" if reading.reward is None else f"{reading.reward:g}"


async def judge_again(
    trial: TrialState, task: HarborTask, step: TaskStep | None, plan: PhasePlan, first: RewardReading
) -> None:
    """Run the verifier `VERIFIER_RUNS - 1` more times on the state the first run judged, and flag
    the trial when any verdict differs from the first."""
    environment, spec = trial.environment, trial.spec
    runs = verifier_runs(spec.params)
    if runs <= 1:
        return
    shared = verifier_mode(task.config, step.config if step else None) == "shared"
    logs = environment.visible.verifier_logs
    readings = [first]
    with tempfile.TemporaryDirectory(prefix="envloop-first-verifier-") as scratch:
        first_logs = Path(scratch) / "verifier"
        if shared:
            await environment.get_dir(logs, first_logs)
            first_logs.mkdir(exist_ok=True)  # a verifier that wrote nothing left nothing to copy
        for n in range(2, runs + 1):
            again = dataclasses.replace(plan, logs=f"{plan.logs}/verifier-runs/{n}".lstrip("/"))
            reading, _ = await verify(trial, task, step, again)
            await environment.stop()
            readings.append(reading)
            if shared:
                await environment.get_dir(logs, spec.artifacts_dir / again.logs / "verifier")
        if shared:
            await environment.put_dir(first_logs, logs)
    if len({r.reward for r in readings}) > 1:
        said = ", ".join(_said(r) for r in readings)
        where = "" if step is None else f" of step {step.name!r}"
        detail = f"one final state{where} scored {said} in {runs} verifier runs"
        environment.flags.append(TrialFlag(kind=VERIFIER_FLAKY_FLAG, detail=detail))
