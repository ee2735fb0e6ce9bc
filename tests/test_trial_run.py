"""A shell trial as an object: the events observers attach to, in the order a trial meets them, and
an observer that fails never changing a verdict. Real tasks on disk, the plain local sandbox."""

import asyncio
from pathlib import Path

from envloop.core.trial import TrialOutcome
from envloop.environments import LocalEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.runners.trial_run import TrialEvent, TrialHookEvent
from tests.test_multistep import APP, REWARD, write_steps_task
from tests.test_runner_shell import ANSWER_TASK, spec_for, write_task

Seen = list[tuple[str, str | None, list[str]]]


def observed(tmp_path: Path, task: Path, params: dict[str, str]) -> tuple[TrialOutcome, Seen]:
    """Run the trial with an observer at every event: (outcome, each event with its step and the
    phases recorded when it came: the trial's, or at its end the outcome's)."""
    seen: Seen = []

    async def note(event: TrialHookEvent) -> None:
        phases = event.outcome.phases if event.outcome is not None else event.trial.phases
        seen.append((event.event, event.step, [phase.name for phase in phases]))

    runner = ShellRunner(LocalEnvironmentProvider("plain"))  # type: ignore[arg-type]
    for event in TrialEvent:
        runner.add_hook(event, note)
    outcome = asyncio.run(runner.run(spec_for(tmp_path, task, params)))
    return outcome, seen


def test_observers_see_a_task_in_one_step_from_its_environment_to_its_end(tmp_path: Path) -> None:
    outcome, seen = observed(tmp_path, ANSWER_TASK, {"AGENT_NAME": "oracle"})
    assert outcome.reward == 1.0, outcome.error
    assert seen == [
        ("environment_ready", None, ["setup"]),
        ("agent_start", None, ["setup"]),
        ("verifier_start", None, ["setup", "agent"]),
        ("ended", None, ["setup", "agent", "verifier", "artifacts", "teardown"]),
    ]


def test_an_agent_that_never_worked_on_the_task_gets_no_verifier_to_observe(tmp_path: Path) -> None:
    task = write_task(tmp_path / "unsolvable", "echo 1 > /dev/null\n")
    outcome, seen = observed(tmp_path, task, {"AGENT_NAME": "oracle"})
    assert outcome.error is not None and outcome.error.type == "agent_error"
    assert [event for event, _, _ in seen] == ["environment_ready", "agent_start", "ended"]


def test_observers_see_each_step_of_a_multi_step_task_by_name(tmp_path: Path) -> None:
    test = f"echo 1 {REWARD}\n"
    task = write_steps_task(
        tmp_path / "two", [("make", test, f"touch {APP}/a\n"), ("extend", test, f"touch {APP}/b\n")]
    )
    outcome, seen = observed(tmp_path, task, {"AGENT_NAME": "oracle"})
    assert outcome.reward == 1.0, outcome.error
    assert [(event, step) for event, step, _ in seen] == [
        ("environment_ready", None),
        ("step_start", "make"),
        ("agent_start", "make"),
        ("verifier_start", "make"),
        ("step_start", "extend"),
        ("agent_start", "extend"),
        ("verifier_start", "extend"),
        ("ended", None),
    ]


def test_an_environment_that_cannot_open_still_ends_the_trial_for_its_observers(tmp_path: Path) -> None:
    (tmp_path / "not-a-directory").write_text("")
    spec = spec_for(tmp_path, ANSWER_TASK, {"AGENT_NAME": "oracle"})
    spec = spec.model_copy(update={"instance_root": tmp_path / "not-a-directory"})
    ended: list[TrialOutcome | None] = []

    async def note(event: TrialHookEvent) -> None:
        ended.append(event.outcome)

    runner = ShellRunner(LocalEnvironmentProvider("plain"))  # type: ignore[arg-type]
    runner.add_hook(TrialEvent.ENDED, note)
    outcome = asyncio.run(runner.run(spec))
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert outcome.error.message.startswith("environment setup failed: ")
    assert [phase.name for phase in outcome.phases] == ["setup"]
    assert [found.error for found in ended if found is not None] == [outcome.error]


def test_an_observer_that_fails_is_a_warning_and_never_the_verdict(tmp_path: Path) -> None:
    async def broken(event: TrialHookEvent) -> None:
        raise RuntimeError("the observer's own bug")

    runner = ShellRunner(LocalEnvironmentProvider("plain"))  # type: ignore[arg-type]
    runner.add_hook(TrialEvent.AGENT_START, broken)
    outcome = asyncio.run(runner.run(spec_for(tmp_path, ANSWER_TASK, {"AGENT_NAME": "oracle"})))
    assert (outcome.status, outcome.reward, outcome.error) == ("completed", 1.0, None)
    assert outcome.warnings[-1] == "observer at agent_start: RuntimeError: the observer's own bug"
