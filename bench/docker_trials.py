"""What a docker trial costs through envloop, beside the same container work done with the docker CLI.

The shape users run: distinct tasks, each with an image of its own (already built: builds are not
what this measures), the oracle agent, two trials at once, through the CLI on a fresh
`ENVLOOP_HOME` (`el job submit --environment docker --concurrency 2 --wait`, the worker it starts
counted). The floor does per task what a trial must: `docker run` a container of the task's image,
`docker exec` the solution, `docker exec` the verifier, read the reward, `docker rm`, two tasks at
once, with the solution and the tests baked into its images (so it copies nothing in).

Marginal per trial = (wall of the large job - wall of the small one) / (difference in tasks), for
each side, measured in interleaved rounds so a change of load moves both alike; the ratio is
envloop's marginal over the floor's. Target: at most 1.5x.

    .venv/bin/python bench/docker_trials.py [--small 4] [--large 24] [--rounds 3]

Needs a running daemon and the base images (scripts/docker-daemon start; scripts/docker-base-images).
"""

import argparse
import asyncio
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import cli_runs

from envloop.environments.docker.cli import docker_binary

SOLVE = "#!/usr/bin/env bash\ntouch /app/done\n"
TEST = "#!/usr/bin/env bash\nr=0; [ -f /app/done ] && r=1; echo $r > /logs/verifier/reward.txt\n"


def write_tasks(root: Path, count: int, token: str) -> Path:
    """`count` distinct tasks, each with an image of its own (a label makes each Dockerfile distinct)."""
    for number in range(count):
        task = root / f"task-{number:04d}"
        for sub in ("environment", "solution", "tests"):
            (task / sub).mkdir(parents=True)
        # No network on either side (the floor runs `--network none`): a task that names none gets
        # Harbor's public default in docker, whose network and observing proxy are another cost.
        (task / "task.toml").write_text(
            'version = "1.0"\n[environment]\nnetwork_mode = "no-network"\n[agent]\ntimeout_sec = 120\n'
        )
        (task / "instruction.md").write_text(f"Task {number}: create /app/done.\n")
        (task / "environment" / "Dockerfile").write_text(
            f"FROM debian:12\nWORKDIR /app\nLABEL bench={token}-{number}\n"
        )
        (task / "solution" / "solve.sh").write_text(SOLVE)
        (task / "tests" / "test.sh").write_text(TEST)
    return root


def floor_images(tasks: Path, count: int) -> list[str]:
    """One image per task for the floor: the task's image with its solution and tests inside."""
    images = []
    for number in range(count):
        task = tasks / f"task-{number:04d}"
        image = f"envloop-bench-floor:{task.name}"
        dockerfile = (task / "environment" / "Dockerfile").read_text() + (
            "COPY solution /solution\nCOPY tests /tests\nRUN mkdir -p /logs/verifier\n"
        )
        subprocess.run(
            [docker_binary(), "build", "-q", "-t", image, "-f", "-", str(task)],
            input=dockerfile.encode(),
            check=True,
            capture_output=True,
        )
        images.append(image)
    return images


async def _docker(*args: str) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        docker_binary(), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"docker {args[0]}: {err.decode()[-300:]}")
    return out


async def _floor_trial(image: str) -> None:
    container = (
        await _docker("run", "-d", "--init", "--network", "none", image, "sleep", "infinity")
    ).strip()
    try:
        await _docker("exec", container.decode(), "bash", "/solution/solve.sh")
        await _docker("exec", container.decode(), "bash", "/tests/test.sh")
        reward = await _docker("exec", container.decode(), "cat", "/logs/verifier/reward.txt")
        assert reward.strip() == b"1", reward
    finally:
        await _docker("rm", "-f", container.decode())


async def _floor(images: list[str], concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(image: str) -> None:
        async with gate:
            await _floor_trial(image)

    started = time.perf_counter()
    await asyncio.gather(*(one(image) for image in images))
    return time.perf_counter() - started


def _envloop(root: Path, tasks: Path, profile: Path, name: str) -> float:
    run = cli_runs.job_through_cli(
        root / name,
        tasks,
        profile,
        capacity=2,
        submit_args=("--environment", "docker", "--concurrency", "2"),
    )
    return run.run.wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=4)
    parser.add_argument("--large", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cli_runs.become_subreaper()
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-docker-"))
    token = secrets.token_hex(4)
    try:
        small = write_tasks(root / "small", args.small, token)
        large = write_tasks(root / "large", args.large, token + "l")
        profile = cli_runs.profile_file(root / "oracle.json", {"AGENT_NAME": "oracle"})
        print(f"building {args.small + args.large} task images and as many floor images (not timed)")
        _envloop(root, small, profile, "warm-small")
        _envloop(root, large, profile, "warm-large")
        floors = {"small": floor_images(small, args.small), "large": floor_images(large, args.large)}
        ratios = []
        for number in range(args.rounds):
            walls: dict[str, float] = {}
            for size, tasks in (("small", small), ("large", large)):
                walls[f"floor-{size}"] = asyncio.run(_floor(floors[size], 2))
                walls[f"envloop-{size}"] = _envloop(root, tasks, profile, f"r{number}-{size}")
            span = args.large - args.small
            floor = (walls["floor-large"] - walls["floor-small"]) / span
            envloop = (walls["envloop-large"] - walls["envloop-small"]) / span
            ratios.append(envloop / floor)
            print(
                f"round {number + 1}: marginal per trial envloop {envloop * 1000:.0f} ms, "
                f"docker CLI floor {floor * 1000:.0f} ms, ratio {envloop / floor:.2f}x "
                f"(walls: {', '.join(f'{k} {v:.2f} s' for k, v in walls.items())})"
            )
        print(f"median ratio {statistics.median(ratios):.2f}x (target <= 1.5x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        listed = subprocess.run(
            [docker_binary(), "images", "-q", "envloop-bench-floor"],
            capture_output=True,
            text=True,
            check=False,
        )
        if listed.stdout.split():
            subprocess.run(
                [docker_binary(), "rmi", "-f", *listed.stdout.split()], capture_output=True, check=False
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
