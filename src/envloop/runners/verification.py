"""Where a verifier runs and what it sees, for a whole task or one step of a multi-step task.

After the agent phase (every process of the agent stopped), the task's collect hooks run and its
artifacts are kept (handoff.py). Then the verifier runs where the task says (tasks/phases.py):

- `shared`: in the agent's environment, with a fresh copy of the tests and a log directory the
  agent never had, under the verifier phase's network policy; where the environment records
  which of the agent's changed files the verifier opened (docker), each is named in a `tamper`
  flag (environments/tampering.py);
- `separate`: in a fresh environment of its own, built from the task's (or the step's) `tests/`,
  which holds the verifier's own files; the kept artifacts are put back at their original paths and
  nothing else of the agent's environment reaches it. A verifier environment that cannot start is a
  `verifier_error`, never a reward, and never a silent fall back to the agent's environment.

The reward is read from the verifier's log directory as the verifier left it, never through a link.
"""

import shutil
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from envloop.core.clock import utc_now
from envloop.core.reward import RewardReading, parse_reward
from envloop.core.status import ErrorType, Phase
from envloop.core.trial import PhaseRecord, TrialError, TrialSpec
from envloop.core.verifier_failures import environment_failure
from envloop.environments import Environment, EnvironmentSetupError
from envloop.environments.base import Mounts
from envloop.environments.policy import operator_policy
from envloop.environments.tampering import Tampering
from envloop.runners import handoff
from envloop.runners.shell_phases import PhasePlan, captures_dir, cut_off, keep_phase_log, not_counted
from envloop.runners.shell_steps import verifier_step
from envloop.runners.trial_state import TrialState
from envloop.tasks.model import HarborTask, TaskStep
from envloop.tasks.phases import phase_networks, verifier_mode, verifier_offline_by_design

_REWARD_READ_LIMIT = 1024 * 1024
SHARED_MOUNTS: Mounts = frozenset({"tests", "verifier_logs", "fresh_home"})
APART_MOUNTS: Mounts = SHARED_MOUNTS | {"fresh_tmp"}
"""A job that wants its verifiers apart, where the environment has no separate one: nothing of the
agent's but its workdir (and what the task shares through it)."""
SEPARATE_MOUNTS: Mounts = frozenset({"verifier_logs"})
"""A separate verifier's image holds its own tests (Harbor does not copy them in)."""


@runtime_checkable
class Watched(Protocol):
    """An environment that can say which of the agent's changes a verifier sharing it used (docker)."""

    async def watch_verifier(self) -> None: ...

    async def verifier_tampering(self) -> list[Tampering]: ...


@runtime_checkable
class VerifierProvider(Protocol):
    def verifier_instance(
        self, task: HarborTask, spec: TrialSpec, step: TaskStep | None, *, task_image: bool = False
    ) -> AbstractAsyncContextManager[Environment]: ...


def _phase(name: str, step: TaskStep | None) -> str:
    return name if step is None else f"{step.name} {name}"


async def verify(
    trial: TrialState, task: HarborTask, step: TaskStep | None, plan: PhasePlan
) -> tuple[RewardReading, TrialError | None]:
    """Collect hooks and artifacts, then the verifier where the task (or the job) says;
    (reading, error). `task` is the trial's, or the step's view of it."""
    environment, provider, spec, phases = trial.environment, trial.provider, trial.spec, trial.phases
    log = f"{plan.logs}/handoff".lstrip("/")
    lines, kept = await _hand_off(trial, task, step, plan)
    networks = phase_networks(task.config, step.config if step else None, environment.default_network)
    opener = provider if isinstance(provider, VerifierProvider) else None
    separate = verifier_mode(task.config, step.config if step else None) == "separate"
    apart = not separate and "separate" in (spec.verifier_environment, operator_policy().verifier_environment)
    mounts = SHARED_MOUNTS
    if apart and opener is None:
        lines.append("verifier environment separate: this environment has none, so the verifier ran in the "
                     "agent's environment (from a HOME and a /tmp of its own)")  # fmt: skip
        apart, mounts = False, APART_MOUNTS
    if lines:
        keep_phase_log(spec, log, "\n".join(lines) + "\n")
    if not separate and not apart:
        await environment.set_network(networks.verifier, _phase("verifier", step))
        watched = environment if isinstance(environment, Watched) else None
        if watched is not None:  # last, so that nothing of envloop's own reads counts as the verifier's
            await watched.watch_verifier()
        verdict = await run_verifier(trial, environment, task, plan, mounts)
        if watched is not None:
            environment.flags.extend(found.flag() for found in await watched.verifier_tampering())
        return verdict
    started = utc_now()
    if opener is None:  # submission refuses such jobs; a worker's plugin provider may still lack it
        phases.append(PhaseRecord(name=Phase.VERIFIER, started_at=started, ended_at=utc_now()))
        message = "the task's verifier runs in a separate environment, which this environment cannot give"
        return RewardReading(reward=None, note="the verifier did not run"), TrialError(
            type=ErrorType.VERIFIER_ERROR, message=message
        )
    if apart:
        # The working directory goes along, as the agent's environment would have shown it.
        workdir = spec.artifacts_dir / plan.logs / ".workdir"
        lines += await environment.get_dir(environment.visible.app, workdir)
        kept.kept.insert(0, (environment.visible.app, workdir))
    try:
        async with trial.contacted.counting(
            opener.verifier_instance(task, spec, step, task_image=apart)
        ) as fresh:
            await fresh.set_network(networks.verifier, _phase("separate verifier", step))
            await handoff.hand_over(fresh, kept)
            mounts = SHARED_MOUNTS if apart else SEPARATE_MOUNTS
            reading, error = await run_verifier(trial, fresh, task, plan, mounts)
            await fresh.stop()
            unreachable = cut_off(_phase("separate verifier", step), fresh)
            lines += await fresh.get_dir(
                fresh.visible.verifier_logs, spec.artifacts_dir / plan.logs / "verifier"
            )
            lines.append(f"verifier: a fresh environment ({fresh.note})")
            keep_phase_log(spec, log, "\n".join(lines) + "\n")
            if unreachable is not None:
                return not_counted(reading, unreachable), unreachable
            return reading, error
    except EnvironmentSetupError as exc:
        phases.append(PhaseRecord(name=Phase.VERIFIER, started_at=started, ended_at=utc_now()))
        reading = RewardReading(reward=None, note="the verifier did not run")
        return reading, TrialError(
            type=ErrorType.VERIFIER_ERROR,
            message=f"the separate verifier's environment could not start: {exc}",
        )
    finally:
        if apart:
            shutil.rmtree(spec.artifacts_dir / plan.logs / ".workdir", ignore_errors=True)


async def _hand_off(
    trial: TrialState, task: HarborTask, step: TaskStep | None, plan: PhasePlan
) -> tuple[list[str], handoff.Handoff]:
    """The collect hooks, then the declared artifacts kept: the handoff log's lines, and what was kept."""
    environment, spec = trial.environment, trial.spec
    lines = await handoff.run_hooks(
        environment, handoff.hooks(task, step), captures_dir(spec) / plan.logs / "collect"
    )
    kept = await handoff.collect(
        environment, handoff.declared(task, step), spec.artifacts_dir / plan.logs / "artifacts"
    )
    lines += [f"artifact {source}" for source, _ in kept.kept] + kept.notes
    return lines, kept


async def _read_reward_file(environment: Environment, path: str) -> str | None:
    """The start of a reward file the verifier wrote, never read through a link."""
    try:
        data = await environment.read_file(path, _REWARD_READ_LIMIT)
    except OSError as exc:
        return f"<unreadable: {exc.strerror or exc}>"
    return None if data is None else data.decode("utf-8", errors="replace")


async def run_verifier(
    trial: TrialState, environment: Environment, task: HarborTask, plan: PhasePlan, mounts: Mounts
) -> tuple[RewardReading, TrialError | None]:
    """Run `bash /tests/test.sh` in `environment` (the trial's, or a separate verifier's) and read
    the reward it wrote."""
    spec, phases, recorder = trial.spec, trial.phases, trial.recorder
    logs = captures_dir(spec) / plan.logs / "verifier"
    started = utc_now()
    command = ["bash", f"{environment.visible.tests}/test.sh"]
    if not any((source / "test.sh").is_file() for source in task.tests_sources):
        phases.append(PhaseRecord(name=Phase.VERIFIER, started_at=started, ended_at=utc_now()))
        reading = RewardReading(reward=None, note="the verifier did not run")
        recorder.add(verifier_step(" ".join(command), started, None, logs, reading))
        return reading, TrialError(type=ErrorType.VERIFIER_ERROR, message="task has no tests/test.sh")
    timeout = plan.verifier_timeout_sec
    # Only the verifier may write a reward: it writes into a fresh directory the agent never had.
    try:
        result = await environment.exec(
            command,
            env=plan.verifier_env,
            timeout=timeout,
            stdout_path=logs / "stdout.txt",
            stderr_path=logs / "stderr.txt",
            mounts=mounts,
            user=plan.verifier_user,
        )
    except EnvironmentSetupError as exc:
        phases.append(PhaseRecord(name=Phase.VERIFIER, started_at=started, ended_at=utc_now()))
        reading = RewardReading(reward=None, note="the verifier did not run")
        recorder.add(verifier_step(" ".join(command), started, None, logs, reading))
        return reading, TrialError(
            type=ErrorType.VERIFIER_ERROR, message=f"the verifier could not start: {exc}"
        )
    phases.append(
        PhaseRecord(
            name=Phase.VERIFIER,
            started_at=started,
            ended_at=utc_now(),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
        )
    )
    written = environment.visible.verifier_logs
    reading = parse_reward(
        await _read_reward_file(environment, f"{written}/reward.txt"),
        await _read_reward_file(environment, f"{written}/reward.json"),
    )
    offline = verifier_offline_by_design(task.config, task.step.config if task.step else None)
    wrote = reading.reward is not None or bool(reading.dimensions)
    lacking = (
        None
        if reading.rejected or wrote
        else environment_failure(None, result.stdout, result.stderr, offline_by_design=offline)
    )
    if lacking is not None:
        # The likely cause of a verifier writing nothing; a reward it wrote is never set aside
        # for its output, which the agent's code (run by the tests) can print at will.
        reading = RewardReading(reward=None, note=f"not counted: {lacking}")
    recorder.add(verifier_step(" ".join(command), started, result, logs, reading))
    if result.timed_out:
        message = f"the verifier exceeded its {timeout:g} s timeout"
        return reading, TrialError(type=ErrorType.VERIFIER_TIMEOUT, message=message)
    if reading.rejected is not None:
        # A reward file that breaks the grammar is a broken verifier, not a score.
        message = reading.rejected
        return reading, TrialError(type=ErrorType.VERIFIER_ERROR, message=message, exit_code=result.exit_code)
    if lacking is not None:
        message = f"the verifier could not do its work: {lacking}"
        return reading, TrialError(type=ErrorType.VERIFIER_ERROR, message=message, exit_code=result.exit_code)
    if result.exit_code != 0 and reading.reward is None:
        message = f"the verifier exited with code {result.exit_code} and wrote no reward"
        return reading, TrialError(type=ErrorType.VERIFIER_ERROR, message=message, exit_code=result.exit_code)
    return reading, None
