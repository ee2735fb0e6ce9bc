"""Multi-step Harbor tasks: loading `[[steps]]`, early stops and the reward roll-up (Harbor's rules,
plus envloop's one stricter rule for a step left without a result)."""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.multistep import StepResult, below_minimum, roll_up, step_values
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.model import TaskFormatError

TWO_STEPS = """version = "1.0"
multi_step_reward_strategy = "{strategy}"

[[steps]]
name = "scaffold"
min_reward = 1.0
custom_field = "kept"
[steps.agent]
timeout_sec = 60.0
user = "root"

[[steps]]
name = "implement"
[steps.verifier]
timeout_sec = 30.0
"""


def write_multistep(root: Path, strategy: str = "mean", *, shared_test: bool = True) -> Path:
    (root / "environment").mkdir(parents=True)
    (root / "task.toml").write_text(TWO_STEPS.format(strategy=strategy))
    if shared_test:
        (root / "tests").mkdir()
        (root / "tests" / "test.sh").write_text("echo shared\n")
    for name in ("scaffold", "implement"):
        step = root / "steps" / name
        (step / "tests").mkdir(parents=True)
        (step / "instruction.md").write_text(f"Do the {name} step.\n")
        (step / "tests" / "check.py").write_text("print('step check')\n")
    return root


def test_a_multi_step_task_loads_its_steps_in_order(tmp_path: Path) -> None:
    task = load_harbor_task(write_multistep(tmp_path / "two-steps"))
    assert [step.name for step in task.steps] == ["scaffold", "implement"]
    assert task.steps[0].instruction == "Do the scaffold step.\n"
    assert task.steps[0].config.min_reward == 1.0
    assert task.steps[0].config.agent.user == "root"
    assert task.steps[1].config.verifier.timeout_sec == 30.0
    assert task.steps[0].config.model_extra == {"custom_field": "kept"}
    assert task.config.multi_step_reward_strategy == "mean"
    assert task.instruction == ""  # no top-level instruction: it would never reach the agent anyway


def test_a_step_without_its_instruction_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = write_multistep(tmp_path / "broken")
    (root / "steps" / "implement" / "instruction.md").unlink()
    with pytest.raises(TaskFormatError, match=r"steps/implement/instruction.md: missing"):
        load_harbor_task(root)


def test_a_step_without_any_verifier_is_refused(tmp_path: Path) -> None:
    root = write_multistep(tmp_path / "no-verifier", shared_test=False)
    (root / "steps" / "scaffold" / "tests" / "test.sh").write_text("echo own\n")
    with pytest.raises(TaskFormatError, match=r"steps/implement/tests/test.sh: missing"):
        load_harbor_task(root)


def test_duplicate_or_unsafe_step_names_are_refused(tmp_path: Path) -> None:
    root = write_multistep(tmp_path / "dup")
    (root / "task.toml").write_text('[[steps]]\nname = "a"\n[[steps]]\nname = "a"\n')
    with pytest.raises(TaskFormatError, match="step 'a' is declared twice"):
        load_harbor_task(root)
    (root / "task.toml").write_text('[[steps]]\nname = "../escape"\n')
    with pytest.raises(TaskFormatError, match=r"steps\.0\.name"):
        load_harbor_task(root)


def test_mean_counts_a_key_a_step_did_not_report_as_zero() -> None:
    steps = [
        StepResult(name="a", values={"reward": 1.0, "style": 0.5}),
        StepResult(name="b", values={"reward": 0.5}),
    ]
    rolled = roll_up("mean", steps)
    assert rolled.reward == 0.75
    assert rolled.dimensions == {"reward": 0.75, "style": 0.25}


def test_final_takes_the_last_steps_result_as_it_is() -> None:
    steps = [StepResult(name="a", values={"reward": 1.0}), StepResult(name="b", values={"reward": 0.0})]
    rolled = roll_up("final", steps)
    assert (rolled.reward, rolled.dimensions) == (0.0, {})


def test_a_step_left_without_a_result_leaves_the_trial_unscored_never_skipped() -> None:
    steps = [
        StepResult(name="a", values={"reward": 1.0}),
        StepResult(name="b", note="the verifier wrote neither reward.txt nor reward.json"),
    ]
    rolled = roll_up("mean", steps)
    assert rolled.reward is None
    assert rolled.note == "step 'b' has no reward (the verifier wrote neither reward.txt nor reward.json)"


def test_min_reward_stops_the_trial_by_number_or_per_key() -> None:
    assert below_minimum({"reward": 0.5}, 1.0) == "reward 0.5 below min_reward 1"
    assert below_minimum({"reward": 1.0}, 1.0) is None
    assert below_minimum({}, 0.0) == "reward none below min_reward 0"
    assert below_minimum({"tests": 1.0}, {"tests": 1.0, "lint": 0.5}) == "lint 0 below min_reward 0.5"
    assert below_minimum({"reward": 0.0}, None) is None


def test_step_values_follow_the_primary_reward_files() -> None:
    assert step_values(0.25, {}) == {"reward": 0.25}
    assert step_values(None, {"a": 1.0, "b": 0.0}) == {"a": 1.0, "b": 0.0}
    assert step_values(None, {}) == {}


def write_steps_task(
    root: Path,
    steps: list[tuple[str, str, str]],
    *,
    strategy: str = "mean",
    extra: dict[str, str] | None = None,
    shared_test: str | None = None,
) -> Path:
    """A multi-step task: each step (name, its test.sh body, its solve.sh body)."""
    (root / "environment").mkdir(parents=True)
    toml = f'version = "1.0"\nmulti_step_reward_strategy = "{strategy}"\n'
    for name, _, _ in steps:
        toml += f'\n[[steps]]\nname = "{name}"\n'
        toml += (extra or {}).get(name, "")
    (root / "task.toml").write_text(toml)
    if shared_test is not None:
        (root / "tests").mkdir()
        (root / "tests" / "test.sh").write_text(shared_test)
        (root / "tests" / "helper.sh").write_text("echo from-task\n")
    for name, test, solve in steps:
        step = root / "steps" / name
        (step / "tests").mkdir(parents=True)
        (step / "solution").mkdir()
        (step / "instruction.md").write_text(f"Instruction of {name}.\n")
        if test:
            (step / "tests" / "test.sh").write_text(test)
        (step / "solution" / "solve.sh").write_text(solve)
    return root


REWARD = '> "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"'
APP = "${ENVLOOP_APP_DIR:-/app}"


def run_trial(tmp_path: Path, task: Path, params: dict[str, str], mode: str = "bwrap") -> TrialOutcome:
    spec = TrialSpec(
        job_id="job_steps",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    return asyncio.run(ShellRunner(LocalEnvironmentProvider(mode)).run(spec))


@pytest.mark.parametrize("mode", ["plain", "bwrap"])
def test_the_oracle_solves_each_step_in_one_environment(tmp_path: Path, mode: str) -> None:
    task = write_steps_task(
        tmp_path / "two",
        [
            ("make", f"test -f {APP}/a && echo 1 {REWARD} || echo 0 {REWARD}\n", f"touch {APP}/a\n"),
            ("extend", "", f"test -f {APP}/a && touch {APP}/b\n"),
        ],
        # The task's own test.sh serves the step without one; its helper is there for every step.
        shared_test=(
            f'test -f {APP}/b && [ "$(bash "${{ENVLOOP_TESTS_DIR:-/tests}}/helper.sh")" = from-task ] '
            f"&& echo 1 {REWARD} || echo 0 {REWARD}\n"
        ),
    )
    outcome = run_trial(tmp_path, task, {"AGENT_NAME": "oracle"}, mode)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    assert "multi-step (mean): 2 of 2 steps ran (make=reward:1, extend=reward:1)" in outcome.warnings
    for name in ("make", "extend"):
        assert (tmp_path / "artifacts" / "steps" / name / "verifier" / "reward.txt").read_text() == "1\n"


def test_a_step_below_its_min_reward_stops_the_trial(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "gated",
        [
            ("first", f"echo 0.5 {REWARD}\n", "true\n"),
            ("second", f"echo 1 {REWARD}\n", "true\n"),
        ],
        extra={"first": "min_reward = 1.0\n"},
    )
    outcome = run_trial(tmp_path, task, {"AGENT_NAME": "nop"})
    assert outcome.reward == 0.5  # the mean over the steps that ran
    assert "stopped after step 'first': reward 0.5 below min_reward 1" in outcome.warnings
    assert not (tmp_path / "artifacts" / "steps" / "second").exists()


def test_final_takes_the_last_step_and_mean_all_of_them(tmp_path: Path) -> None:
    steps = [("a", f"echo 1 {REWARD}\n", "true\n"), ("b", f"echo 0 {REWARD}\n", "true\n")]
    final = run_trial(
        tmp_path / "f", write_steps_task(tmp_path / "final", steps, strategy="final"), {"AGENT_NAME": "nop"}
    )
    mean = run_trial(tmp_path / "m", write_steps_task(tmp_path / "mean", steps), {"AGENT_NAME": "nop"})
    assert (final.reward, mean.reward) == (0.0, 0.5)


def test_a_step_without_a_reward_leaves_the_trial_unscored(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "silent", [("a", f"echo 1 {REWARD}\n", "true\n"), ("b", "exit 0\n", "true\n")]
    )
    outcome = run_trial(tmp_path, task, {"AGENT_NAME": "nop"})
    assert outcome.reward is None
    assert outcome.reward_note is not None and outcome.reward_note.startswith("step 'b' has no reward")


def test_each_step_gets_its_instruction_and_its_agent_user(tmp_path: Path) -> None:
    task = write_steps_task(
        tmp_path / "users",
        [
            ("as-root", f"cat {APP}/seen {APP}/uid; echo 1 {REWARD}\n", ""),
            ("as-agent", f"cat {APP}/seen {APP}/uid; echo 1 {REWARD}\n", ""),
        ],
        extra={"as-root": '[steps.agent]\nuser = "root"\n'},
    )
    command = f'echo "$ENVLOOP_INSTRUCTION" >> {APP}/seen; id -u >> {APP}/uid'
    run_trial(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    second = tmp_path / "artifacts" / "steps" / "as-agent" / "verifier"
    stdout = tmp_path / "artifacts" / "steps" / "as-agent" / "verifier" / "stdout.txt"
    text = stdout.read_text() if stdout.exists() else (second / "stdout.txt").read_text()
    assert "Instruction of as-root." in text and "Instruction of as-agent." in text
    assert text.split("\n")[-3:-1] == ["0", "1000"]
