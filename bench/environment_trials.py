"""A trivial trial from start to verdict in each environment: the shell runner with the oracle agent
(`touch /app/done`; the verifier writes reward 1), in the docker environment from a cached task image
and in the local bubblewrap sandbox. Interleaved rounds, so drift on a shared machine hits both alike;
the first docker trial (which builds the image) is reported on its own, as are the docker calls one
cached-image trial makes.

    .venv/bin/python bench/environment_trials.py [--rounds 10]

Needs a running daemon and the base images (scripts/docker-daemon start; scripts/docker-base-images).
"""

import argparse
import asyncio
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments import EnvironmentProvider, LocalEnvironmentProvider
from envloop.environments.docker.cli import daemon_version, docker_binary
from envloop.environments.docker.images import BuildRecords, task_image
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task

REWARD = (
    "#!/usr/bin/env bash\nreward=0; [ -f /app/done ] && reward=1\necho $reward > /logs/verifier/reward.txt\n"
)


def write_task(root: Path) -> Path:
    for sub in ("tests", "solution", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n')
    (root / "instruction.md").write_text("Create /app/done.\n")
    (root / "environment" / "Dockerfile").write_text(
        f"FROM debian:12\nWORKDIR /app\nLABEL token={secrets.token_hex(8)}\n"
    )
    (root / "tests" / "test.sh").write_text(REWARD)
    (root / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\ntouch /app/done\n")
    return root


def trial(provider: EnvironmentProvider, task: Path, scratch: Path) -> float:
    run = scratch / new_id("run")
    spec = TrialSpec(
        job_id="job_bench",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="bench/oracle@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "oracle"},
        task_dir=task,
        instance_root=run / "instances",
        artifacts_dir=run / "artifacts",
    )
    started = time.perf_counter()
    outcome = asyncio.run(ShellRunner(provider).run(spec))
    elapsed = time.perf_counter() - started
    if outcome.reward != 1.0:
        raise SystemExit(f"the trial did not pass: {outcome.error}")
    return elapsed


def count_docker_calls(provider: EnvironmentProvider, task: Path, scratch: Path) -> int:
    calls = 0
    original = asyncio.create_subprocess_exec

    async def counting(program: Any, *args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        nonlocal calls
        calls += str(program) == docker_binary()
        return await original(program, *args, **kwargs)

    asyncio.create_subprocess_exec = counting
    try:
        trial(provider, task, scratch)
    finally:
        asyncio.create_subprocess_exec = original
    return calls


def summary(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"{name:<38} median {statistics.median(ordered) * 1000:7.0f} ms   p90 {p90 * 1000:7.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    print(f"docker {asyncio.run(daemon_version())}; {rounds} interleaved rounds")
    with tempfile.TemporaryDirectory(prefix="envloop-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        task = write_task(scratch / "task")
        image = task_image(load_harbor_task(task).digest)
        docker = DockerEnvironmentProvider(BuildRecords(scratch / "builds"))
        local = LocalEnvironmentProvider()
        try:
            print(summary("docker, first trial (builds the image)", [trial(docker, task, scratch)]))
            timings: dict[str, list[float]] = {"docker, cached image": [], "local bubblewrap sandbox": []}
            for _ in range(rounds):
                timings["docker, cached image"].append(trial(docker, task, scratch))
                timings["local bubblewrap sandbox"].append(trial(local, task, scratch))
            for name, seconds in timings.items():
                print(summary(name, seconds))
            print(f"docker calls per cached-image trial: {count_docker_calls(docker, task, scratch)}")
        finally:
            subprocess.run([docker_binary(), "rmi", "--force", image], capture_output=True, check=False)


if __name__ == "__main__":
    main()
