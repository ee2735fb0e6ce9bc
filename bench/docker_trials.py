"""What a docker trial costs through envloop, beside Harbor and the same container work by the docker CLI.

The shape users run: distinct tasks, each with an image of its own (already built: builds are not
what this measures), the oracle agent, two trials at once, through the CLI on a fresh
`ENVLOOP_HOME` (`el job submit --environment docker --concurrency 2 --wait`, the worker it starts
counted). The floor does per task what a trial must: `docker run` a container of the task's image,
`docker exec` the solution, `docker exec` the verifier, read the reward, `docker rm`, two tasks at
once, with the solution and the tests baked into its images (so it copies nothing in). Harbor, the
peer, runs the same tasks as its users run them: `harbor run --agent oracle --env docker
--n-concurrent 2` from a venv of its own (`bench/peers/setup_harbor.py` makes it under the cache
directory, with its Python 3.12+ and the Docker Compose plugin; never in envloop's `.venv`).

`--network none` (the default): the tasks set `network_mode = "no-network"` and the floor runs
`--network none`. `--network public`: the tasks name no network (Harbor's default, the internet) and
the floor gives each container a bridge network of its own, created and removed with it.
`--network allowlist`: the tasks allow one host (`example.com`), on the same floor as public.

Marginal per trial = (wall of the large job - wall of the small one) / (difference in tasks), for
each side, measured in interleaved rounds (floor, envloop, Harbor on each size) so a change of load
moves all alike; the ratios are envloop's marginal over the floor's (target: at most 1.5x), Harbor's
over the floor's, and envloop's over Harbor's. Where Harbor cannot run (it cannot be installed, or it
refuses the tasks: its docker environment enforces no-network only with a sidecar it must pull), the
output says why and the rest runs; `--without-harbor` leaves it out.

    .venv/bin/python bench/docker_trials.py [--small 4] [--large 24] [--rounds 3]
                                            [--network none|public|allowlist] [--without-harbor]

Needs a running daemon and the base images (scripts/docker-daemon start; scripts/docker-base-images).
"""

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cli_runs

from envloop.environments.docker.cli import docker_binary

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))  # Harbor's side and its setup

from harbor_side import Harbor
from setup_harbor import HarborUnavailableError, default_venv

SOLVE = "#!/usr/bin/env bash\ntouch /app/done\n"
TEST = "#!/usr/bin/env bash\nr=0; [ -f /app/done ] && r=1; echo $r > /logs/verifier/reward.txt\n"


def write_tasks(root: Path, count: int, token: str, network: str = "none") -> Path:
    """`count` distinct tasks, each with an image of its own (a label makes each Dockerfile distinct).

    With `network` "none" they set `network_mode = "no-network"`; with "public" they name no network
    and get Harbor's default, the internet; with "allowlist" they allow `example.com` alone.
    """
    environment = {
        "none": '[environment]\nnetwork_mode = "no-network"\n',
        "public": "",
        "allowlist": '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["example.com"]\n',
    }[network]
    for number in range(count):
        task = root / f"task-{number:04d}"
        for sub in ("environment", "solution", "tests"):
            (task / sub).mkdir(parents=True)
        (task / "task.toml").write_text(f'version = "1.0"\n{environment}[agent]\ntimeout_sec = 120\n')
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


async def _floor_trial(image: str, network: str) -> None:
    container = (
        await _docker("run", "-d", "--init", "--network", network, image, "sleep", "infinity")
    ).strip()
    try:
        await _docker("exec", container.decode(), "bash", "/solution/solve.sh")
        await _docker("exec", container.decode(), "bash", "/tests/test.sh")
        reward = await _docker("exec", container.decode(), "cat", "/logs/verifier/reward.txt")
        assert reward.strip() == b"1", reward
    finally:
        await _docker("rm", "-f", container.decode())


async def _floor_trial_on_own_bridge(image: str) -> None:
    """A public trial's floor: a bridge network of its own, created before the container and
    removed after it."""
    network = f"envloop-bench-floor-{secrets.token_hex(6)}"
    await _docker("network", "create", "--driver", "bridge", network)
    try:
        await _floor_trial(image, network)
    finally:
        await _docker("network", "rm", network)


async def _floor(images: list[str], concurrency: int, network: str) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(image: str) -> None:
        async with gate:
            if network != "none":
                await _floor_trial_on_own_bridge(image)
            else:
                await _floor_trial(image, "none")

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


def _task_images(token: str) -> list[str]:
    """The images built from this run's tasks, by envloop and by Harbor (the same content, often
    the same image), told apart by the label their Dockerfiles carry: others' runs keep theirs."""
    docker = docker_binary()
    listed = subprocess.run(
        [docker, "images", "-q", "--no-trunc", "--filter", "label=bench"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if not listed:
        return []
    labels = subprocess.run(
        [docker, "image", "inspect", "--format", '{{.Id}} {{index .Config.Labels "bench"}}', *set(listed)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    return [line.split()[0] for line in labels if line.split()[1:] and line.split()[1].startswith(token)]


def _harbor_ready(args: argparse.Namespace, root: Path, sizes: dict[str, Path]) -> tuple[Harbor | None, str]:
    """Harbor installed and through one untimed run on each size (which builds its images), or
    None and why it cannot run here."""
    if args.without_harbor:
        return None, "--without-harbor"
    try:
        harbor = Harbor.installed(args.harbor_venv)
    except HarborUnavailableError as exc:
        return None, str(exc)
    try:
        for size, tasks in sizes.items():
            count = len(list(tasks.iterdir()))
            harbor.run(tasks, count, 2, root / f"harbor-warm-{size}")
    except RuntimeError as exc:
        if args.network == "none":  # what its error leaves unsaid
            return (
                None,
                f"{exc} (Harbor's docker environment enforces no-network with a sidecar it "
                "starts only where a probe container of an alpine image it pulls runs; "
                "--network public runs Harbor)",
            )
        return None, str(exc)
    return harbor, ""


def _ratio(mine: float, theirs: float) -> float | None:
    """`mine / theirs`, or None when either marginal is not positive (load drowned a small run)."""
    return mine / theirs if mine > 0 and theirs > 0 else None


def _rounds(args: argparse.Namespace, root: Path, sizes: dict[str, Path], harbor: Harbor | None) -> None:
    profile = cli_runs.profile_file(root / "oracle.json", {"AGENT_NAME": "oracle"})
    floors = {size: floor_images(tasks, len(list(tasks.iterdir()))) for size, tasks in sizes.items()}
    span = args.large - args.small
    ratios: dict[str, list[float]] = {"envloop/floor": [], "Harbor/floor": [], "envloop/Harbor": []}
    for number in range(args.rounds):
        walls: dict[str, float] = {}
        for size, tasks in sizes.items():
            walls[f"floor-{size}"] = asyncio.run(_floor(floors[size], 2, args.network))
            walls[f"envloop-{size}"] = _envloop(root, tasks, profile, f"r{number}-{size}")
            if harbor is not None:
                count = len(floors[size])
                used = harbor.run(tasks, count, 2, root / f"harbor-r{number}-{size}")
                walls[f"harbor-{size}"] = used.wall
        marginal = {
            side: (walls[f"{side}-large"] - walls[f"{side}-small"]) / span
            for side in ("floor", "envloop", "harbor")
            if f"{side}-large" in walls
        }
        figures = [f"{_LABELS[side]} {marginal[side] * 1000:.0f} ms" for side in _LABELS if side in marginal]
        shown = []
        for name, (mine, theirs) in _PAIRS.items():
            if mine in marginal and theirs in marginal:
                ratio = _ratio(marginal[mine], marginal[theirs])
                shown.append(f"{name} {'n/a' if ratio is None else f'{ratio:.2f}x'}")
                if ratio is not None:
                    ratios[name].append(ratio)
        print(
            f"round {number + 1}: marginal per trial {', '.join(figures)}; {', '.join(shown)} "
            f"(walls: {', '.join(f'{k} {v:.2f} s' for k, v in walls.items())})"
        )
        sys.stdout.flush()
    for name, values in ratios.items():
        target = " (target <= 1.5x)" if name == "envloop/floor" else ""
        if values:
            print(f"median {name} {statistics.median(values):.2f}x over {len(values)} round(s){target}")
        elif name != "envloop/floor" and harbor is None:
            continue
        else:
            print(f"median {name}: n/a, no round gave both a positive marginal (too few tasks for the load)")


_LABELS = {"envloop": "envloop", "harbor": "Harbor", "floor": "docker CLI floor"}
_PAIRS = {
    "envloop/floor": ("envloop", "floor"),
    "Harbor/floor": ("harbor", "floor"),
    "envloop/Harbor": ("envloop", "harbor"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=4)
    parser.add_argument("--large", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--network", choices=("none", "public", "allowlist"), default="none")
    parser.add_argument("--without-harbor", action="store_true", help="do not install or run Harbor")
    parser.add_argument("--harbor-venv", type=Path, default=default_venv())
    args = parser.parse_args()
    if args.large <= args.small:
        parser.error("--large must be more than --small (the marginal cost divides by the difference)")
    cli_runs.become_subreaper()
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-docker-"))
    token = secrets.token_hex(4)
    print(f"network {args.network}, concurrency 2, {os.cpu_count()} cores")
    print(f"load average at the start: {os.getloadavg()[0]:.2f} (the machine is shared)")
    try:
        sizes = {
            "small": write_tasks(root / "small", args.small, token, args.network),
            "large": write_tasks(root / "large", args.large, token + "l", args.network),
        }
        profile = cli_runs.profile_file(root / "oracle.json", {"AGENT_NAME": "oracle"})
        print(f"building {args.small + args.large} task images for each side (not timed)")
        _envloop(root, sizes["small"], profile, "warm-small")
        _envloop(root, sizes["large"], profile, "warm-large")
        harbor, why = _harbor_ready(args, root, sizes)
        print(f"Harbor from {args.harbor_venv}" if harbor else f"Harbor NOT RUN: {why}")
        sys.stdout.flush()
        _rounds(args, root, sizes, harbor)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        listed = subprocess.run(
            [docker_binary(), "images", "-q", "envloop-bench-floor"],
            capture_output=True,
            text=True,
            check=False,
        )
        built = sorted(set(listed.stdout.split()) | set(_task_images(token)))
        if built:
            subprocess.run([docker_binary(), "rmi", "-f", *built], capture_output=True, check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
