"""The `docker` environment end to end: real task images on a real daemon, real containers, the real
shell runner and its agents. Each task's Dockerfile carries a fresh token so no earlier run's
image or layer cache can stand in for building it."""

import asyncio
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.images import BuildRecords, task_image
from envloop.environments.docker.orphans import trial_containers
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task
from tests.conftest import El, captured, make_task, wait_for, write_profile
from tests.docker_daemon import command_running, docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

REWARD_IF_DONE = (
    "#!/usr/bin/env bash\n"
    "if [ -f /app/done ]; then echo 1 > /logs/verifier/reward.txt\n"
    "else echo 0 > /logs/verifier/reward.txt; fi\n"
)


def write_task(
    root: Path,
    *,
    dockerfile: str = "FROM debian:12\nWORKDIR /app\n",
    test_sh: str = REWARD_IF_DONE,
    solve_sh: str = "#!/usr/bin/env bash\ntouch /app/done\n",
    toml: str = "",
) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "solution").mkdir()
    (root / "environment").mkdir()
    (root / "task.toml").write_text('version = "1.0"\n' + toml)
    (root / "instruction.md").write_text("Create /app/done.\n")
    (root / "environment" / "Dockerfile").write_text(f"{dockerfile}\nLABEL token={secrets.token_hex(8)}\n")
    (root / "tests" / "test.sh").write_text(test_sh)
    (root / "solution" / "solve.sh").write_text(solve_sh)
    return root


@pytest.fixture
def images() -> Iterator[list[str]]:
    """Task images a test built, removed afterwards so runs do not pile images up."""
    built: list[str] = []
    yield built
    for image in built:
        subprocess.run([docker_binary(), "rmi", "--force", image], capture_output=True, check=False)


def spec_for(tmp_path: Path, task_dir: Path, params: dict[str, str], **extra: object) -> TrialSpec:
    return TrialSpec(
        job_id="job_docker",
        trial_id=new_id("trl"),
        task_name=task_dir.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        task_dir=task_dir,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **extra,
    )


def run_docker(tmp_path: Path, spec: TrialSpec, images: list[str]) -> TrialOutcome:
    assert spec.task_dir is not None
    images.append(task_image(load_harbor_task(spec.task_dir).digest))
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    return asyncio.run(ShellRunner(provider).run(spec))


def test_oracle_passes_in_the_tasks_own_container(tmp_path: Path, images: list[str]) -> None:
    task = write_task(tmp_path / "task")
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})
    outcome = run_docker(tmp_path, spec, images)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    assert outcome.sandbox == "docker"
    assert "network: agent public, verifier public" in (outcome.sandbox_note or "")  # Harbor's default
    assert (tmp_path / "artifacts" / "verifier" / "reward.txt").read_text() == "1\n"
    assert asyncio.run(trial_containers(spec.trial_id)) == []


def test_nop_scores_zero_and_leaves_no_container(tmp_path: Path, images: list[str]) -> None:
    task = write_task(tmp_path / "task")
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "nop"})
    outcome = run_docker(tmp_path, spec, images)
    assert outcome.reward == 0.0
    assert asyncio.run(trial_containers(spec.trial_id)) == []


def test_a_verifier_that_needs_a_package_the_dockerfile_installs_passes_in_docker_only(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_DOCKER_BUILD_NETWORK", "host")
    dockerfile = (
        "FROM debian:12\nRUN apt-get update -qq && apt-get install -y -qq --no-install-recommends tree "
        ">/dev/null\nWORKDIR /app\n"
    )
    test_sh = "#!/usr/bin/env bash\nset -e\ntree /app >/dev/null\n" + REWARD_IF_DONE.split("\n", 1)[1]
    task = write_task(tmp_path / "task", dockerfile=dockerfile, test_sh=test_sh)
    in_docker = run_docker(
        tmp_path / "docker", spec_for(tmp_path / "docker", task, {"AGENT_NAME": "oracle"}), images
    )
    assert in_docker.error is None, in_docker.error
    assert in_docker.reward == 1.0
    local_spec = spec_for(tmp_path / "local", task, {"AGENT_NAME": "oracle"})
    locally = asyncio.run(ShellRunner(LocalEnvironmentProvider()).run(local_spec))
    # The local sandbox lacks the package: that is the verifier's failure, never a reward of 0.
    assert locally.reward is None
    assert locally.error is not None and locally.error.type == "verifier_error"


def test_a_build_failure_is_an_environment_error_naming_the_builds_reason(
    tmp_path: Path, images: list[str]
) -> None:
    task = write_task(tmp_path / "task", dockerfile="FROM debian:12\nRUN exit 3\n")
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, {"AGENT_NAME": "oracle"}), images)
    assert outcome.reward is None
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert "did not build" in outcome.error.message and "exit code: 3" in outcome.error.message


def test_a_task_naming_no_network_gets_harbors_public_default_and_a_closed_one_loopback_alone(
    tmp_path: Path, images: list[str]
) -> None:
    test_sh = (
        "#!/usr/bin/env bash\n"
        'reward=0; [ "$(ls /sys/class/net)" = lo ] && reward=1\n'
        "echo $reward > /logs/verifier/reward.txt\n"
    )
    default = write_task(tmp_path / "default", test_sh=test_sh)
    opened = run_docker(tmp_path / "d", spec_for(tmp_path / "d", default, {"AGENT_NAME": "nop"}), images)
    assert opened.reward == 0.0 and "network: agent public, verifier public" in (opened.sandbox_note or "")
    toml = '[environment]\nnetwork_mode = "no-network"\n'
    closed = write_task(tmp_path / "closed", test_sh=test_sh, toml=toml)
    assert run_docker(tmp_path, spec_for(tmp_path, closed, {"AGENT_NAME": "nop"}), images).reward == 1.0


def test_the_agent_runs_as_the_tasks_user_and_the_verifier_as_root(tmp_path: Path, images: list[str]) -> None:
    test_sh = (
        "#!/usr/bin/env bash\n"
        '[ "$(id -u)" = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'
    )
    task = write_task(tmp_path / "task", test_sh=test_sh, toml='[agent]\nuser = "nobody"\n')
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": "id -un"}
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, params), images)
    assert outcome.error is None, outcome.error
    assert (tmp_path / "artifacts" / "agent" / "stdout.txt").read_text() == "nobody\n"
    assert outcome.reward == 1.0
    ghost = write_task(tmp_path / "ghost", toml='[agent]\nuser = "ghost"\n')
    refused = run_docker(tmp_path / "g", spec_for(tmp_path / "g", ghost, {"AGENT_NAME": "oracle"}), images)
    assert refused.error is not None and refused.error.type == "environment_error"
    assert "'ghost': not a user of the task's image" in refused.error.message


def test_the_agent_cannot_forge_the_reward(tmp_path: Path, images: list[str]) -> None:
    forge = (
        "mkdir -p /tests /logs/verifier && printf 'echo 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh; "
        "ls /solution 2>/dev/null && echo SOLUTION-VISIBLE; "
        "nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.05; done' "
        ">/dev/null 2>&1 &"
    )
    test_sh = "#!/usr/bin/env bash\nsleep 0.5\necho 0 > /logs/verifier/reward.txt\nsleep 0.5\n"
    task = write_task(tmp_path / "task", test_sh=test_sh)
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": forge}
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, params), images)
    assert outcome.reward == 0.0
    assert "SOLUTION-VISIBLE" not in captured(tmp_path / "artifacts" / "agent" / "stdout.txt")


def test_logs_come_out_masked_and_never_through_a_link(tmp_path: Path, images: list[str]) -> None:
    key = "sk-" + secrets.token_hex(12)
    command = (
        'echo "key $HF_TOKEN" > /logs/agent/note.txt; ln -s /etc/passwd /logs/agent/passwd; '
        'echo "out $HF_TOKEN"'
    )
    task = write_task(tmp_path / "task")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": command, "HF_TOKEN": key}
    spec = spec_for(tmp_path, task, params, secret_values=(key,))
    outcome = run_docker(tmp_path, spec, images)
    assert outcome.error is None, outcome.error
    agent = tmp_path / "artifacts" / "agent"
    assert (agent / "note.txt").read_text() == "key ***\n"
    assert (agent / "stdout.txt").read_text() == "out ***\n"
    assert not (agent / "passwd").exists()
    assert not (tmp_path / "artifacts" / ".captures").exists()


def test_command_steps_record_the_files_they_changed(tmp_path: Path, images: list[str]) -> None:
    task = write_task(tmp_path / "task")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": "echo hello > /app/greeting.txt && touch /app/done"}
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, params), images)
    assert outcome.reward == 1.0
    trajectory = json.loads((tmp_path / "artifacts" / "trajectory.json").read_text())
    tool_steps = [step for step in trajectory["steps"] if step["kind"] == "tool"]
    changes = {change["path"]: change for change in tool_steps[0]["changes"]}
    assert changes["greeting.txt"]["change"] == "created"
    assert "+hello" in changes["greeting.txt"]["diff"]
    assert changes["done"]["change"] == "created"


def test_a_cancelled_trial_leaves_no_container(tmp_path: Path, images: list[str]) -> None:
    task = write_task(tmp_path / "task")
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": "sleep 1000"})
    assert spec.task_dir is not None
    images.append(task_image(load_harbor_task(spec.task_dir).digest))
    runner = ShellRunner(DockerEnvironmentProvider(BuildRecords(tmp_path / "builds")))

    async def main() -> list[str]:
        trial = asyncio.create_task(runner.run(spec))
        await command_running(spec.trial_id, "sleep 1000")
        trial.cancel()
        with pytest.raises(asyncio.CancelledError):
            await trial
        return await trial_containers(spec.trial_id)

    assert asyncio.run(main()) == []


def test_memory_beyond_the_operators_ceiling_is_killed_and_reported(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOOP_MAX_MEMORY_MB", "64")
    task = write_task(tmp_path / "task", toml="[environment]\nmemory_mb = 100000\n")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": "head -c 400000000 /dev/zero | tail -n 1 >/dev/null"}
    outcome = run_docker(tmp_path, spec_for(tmp_path, task, params), images)
    assert "memory 64 MB (cgroup, no swap)" in (outcome.sandbox_note or "")
    assert any("capped at the operator's maximum 64 MB" in w for w in outcome.warnings)
    assert outcome.error is not None and outcome.error.type == "resource_exhausted"
    assert "out of memory" in outcome.error.message


def test_a_job_with_environment_docker_runs_in_containers_and_refuses_tasks_that_failed_to_build(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    root = tmp_path / "tasks"
    token = secrets.token_hex(6)
    good = make_task(root, "alpha", solve='touch "$ENVLOOP_APP_DIR/done"')
    (good / "environment" / "Dockerfile").write_text(f"FROM debian:12\nWORKDIR /app\nLABEL token={token}\n")
    broken = make_task(root, "beta")
    (broken / "environment" / "Dockerfile").write_text(f"FROM debian:12\nRUN echo {token} && exit 7\n")
    el.ok("dataset", "push", str(root), "--name", "dock")
    built = el("dataset", "build", "dock@1", "--json", timeout=300)
    images.extend(t["image"] for t in built.json()["tasks"])
    el.ok(
        "profile",
        "create",
        "team/oracle",
        "1",
        "--file",
        str(write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})),
    )

    refused = el(
        "job", "submit", "--dataset", "dock@1", "--profile", "team/oracle@1", "--environment", "docker"
    )
    assert refused.code == 2
    assert "cannot run in docker: beta (" in refused.stderr and "alpha" not in refused.stderr
    assert el("job", "list", "--json").json() == []

    job = el.ok(
        "job",
        "submit",
        "--dataset",
        "dock@1",
        "--profile",
        "team/oracle@1",
        "--task",
        "alpha",
        "--environment",
        "docker",
        "--wait",
        "--json",
        timeout=300,
    ).json()
    assert job["environment"] == "docker"
    [trial] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert (trial["status"], trial["reward"], trial["sandbox"]) == ("completed", 1.0, "docker")
    assert asyncio.run(trial_containers(trial["id"])) == []


def test_auto_runs_a_task_with_build_steps_in_docker_and_one_without_locally(
    tmp_path: Path, images: list[str]
) -> None:
    with_run = write_task(
        tmp_path / "with-run", dockerfile="FROM debian:12\nWORKDIR /app\nRUN touch /built\n"
    )
    without = write_task(tmp_path / "without")
    outcomes = {}
    for task in (with_run, without):
        spec = spec_for(tmp_path / task.name, task, {"AGENT_NAME": "oracle"}, environment="auto")
        spec = spec.model_copy(update={"builds_dir": tmp_path / "builds"})
        images.append(task_image(load_harbor_task(task).digest))
        outcomes[task.name] = asyncio.run(ShellRunner().run(spec))
    assert (outcomes["with-run"].sandbox, outcomes["with-run"].reward) == ("docker", 1.0)
    assert (outcomes["without"].sandbox, outcomes["without"].reward) == ("bwrap", 1.0)


def test_a_killed_workers_container_is_removed_when_the_next_worker_starts(
    el: El, tmp_path: Path, images: list[str]
) -> None:
    root = tmp_path / "tasks"
    task = make_task(root, "sleeper")
    (task / "environment" / "Dockerfile").write_text(f"FROM debian:12\nLABEL token={secrets.token_hex(8)}\n")
    images.append(task_image(load_harbor_task(task).digest))
    el.ok("dataset", "push", str(root), "--name", "sleepy")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": "sleep 600"}
    el.ok("profile", "create", "team/sleeper", "1", "--file", str(write_profile(tmp_path / "p.json", params)))
    job = el.ok(
        "job",
        "submit",
        "--dataset",
        "sleepy@1",
        "--profile",
        "team/sleeper@1",
        "--environment",
        "docker",
        "--json",
    ).json()
    [trial] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    deadline = time.monotonic() + 240
    while not asyncio.run(trial_containers(trial["id"])):
        assert time.monotonic() < deadline, "the trial's container never started"
        time.sleep(0.5)
    worker_pid = int((el.home / "background-worker.lock").read_text().strip())
    os.kill(worker_pid, signal.SIGKILL)
    wait_for(lambda: _dead(worker_pid))
    assert asyncio.run(trial_containers(trial["id"])) != []  # nobody removed it: its worker is dead

    # The worker died on this host: cancelling ends its trial at once instead of waiting 60 s for a
    # worker to stop it, and the next worker needs no lease to expire before it can exit.
    cancelled = el.ok("job", "cancel", job["id"], "--json", timeout=30).json()
    assert cancelled["status"] == "cancelled"
    el.ok("worker", "--idle-exit", "0.5", timeout=30)
    assert asyncio.run(trial_containers(trial["id"])) == []


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_agent_timeout_kills_its_command_and_the_verifier_still_runs(
    tmp_path: Path, images: list[str]
) -> None:
    task = write_task(tmp_path / "task")
    command = "touch /app/started; sleep 600; touch /app/done"
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "command", "AGENT_COMMAND": command}, agent_timeout_sec=2)
    outcome = run_docker(tmp_path, spec, images)
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert outcome.reward == 0.0
    trajectory = json.loads((tmp_path / "artifacts" / "trajectory.json").read_text())
    [step] = [s for s in trajectory["steps"] if s["kind"] == "tool"]
    assert step["error"].startswith("interrupted")
    assert [c["path"] for c in step["changes"]] == ["started"]
