"""Harbor's verifier modes, run on Harbor's own example tasks as their authors wrote them.

`verifier-mode-matrix` covers every way a task says where its verifier runs (omitted, explicit
separate, `[verifier.environment]` implying separate, separate reusing the top-level environment
with `tests/` as build context, and step-level overrides in both directions); two more examples
hand artifacts to a separate verifier. Each must give the oracle 1 and the nop agent 0: a verifier
that silently ran in the agent's environment scores the oracle 0 on these tasks.
"""

import asyncio
import shutil
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.orphans import trial_containers
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from tests.conftest import SHARED
from tests.docker_daemon import docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

EXAMPLES = SHARED / "harbor-examples" / "tasks"
TASKS = [
    "verifier-mode-matrix/shared-default",
    "verifier-mode-matrix/separate-explicit",
    "verifier-mode-matrix/separate-implicit",
    "verifier-mode-matrix/separate-reuse-env",
    "verifier-mode-matrix/multistep-all-shared",
    "verifier-mode-matrix/multistep-all-separate",
    "verifier-mode-matrix/multistep-top-shared-mixed",
    "verifier-mode-matrix/multistep-top-separate-mixed",
    "separate-verifier-environment",
    "separate-verifier-multi-step",
]


def run(tmp_path: Path, task: str, agent: str) -> tuple[TrialOutcome, Path]:
    copy = tmp_path / "task"
    shutil.copytree(EXAMPLES / task, copy)
    spec = TrialSpec(
        job_id="job_modes",
        trial_id=new_id("trl"),
        task_name=copy.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": agent},
        task_dir=copy,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    outcome = asyncio.run(ShellRunner(provider).run(spec))
    assert asyncio.run(trial_containers(spec.trial_id)) == [], "a container of the trial was left behind"
    return outcome, tmp_path / "artifacts"


@pytest.mark.parametrize("task", TASKS)
def test_the_oracle_passes_and_nop_fails_wherever_the_verifier_runs(tmp_path: Path, task: str) -> None:
    oracle, _ = run(tmp_path / "oracle", task, "oracle")
    assert oracle.error is None, oracle.error
    assert oracle.reward == 1.0, oracle.reward_note
    nop, _ = run(tmp_path / "nop", task, "nop")
    assert nop.reward == 0.0, (nop.error, nop.reward_note)


def test_a_separate_verifier_gets_only_the_declared_artifacts_and_they_are_kept(tmp_path: Path) -> None:
    outcome, kept = run(tmp_path, "verifier-mode-matrix/separate-explicit", "oracle")
    assert outcome.reward == 1.0
    # Declared and conventional artifacts are kept by their paths; the agent-only file is not.
    assert (kept / "artifacts" / "tmp" / "separate-explicit-configured.txt").is_file()
    assert (kept / "artifacts" / "logs" / "artifacts" / "mode.txt").read_text() == "separate-explicit\n"
    assert not (kept / "artifacts" / "tmp" / "separate-explicit-agent-only.txt").exists()
    assert (kept / "verifier" / "reward.txt").read_text().strip() == "1"
    assert "artifact /tmp/separate-explicit-configured.txt" in (kept / "handoff" / "output.txt").read_text()


def test_a_separate_verifier_whose_image_cannot_build_is_a_verifier_error_never_a_reward(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "src"
    shutil.copytree(EXAMPLES / "verifier-mode-matrix" / "separate-explicit", copy)
    (copy / "tests" / "Dockerfile").write_text("FROM ubuntu:24.04\nRUN exit 3\n")
    outcome, _ = run(tmp_path / "run", str(copy), "oracle")
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "verifier_error"
    assert "separate verifier's environment could not start" in outcome.error.message
