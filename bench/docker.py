"""What the docker environment costs per trial, next to a bubblewrap launch of the same command.

Interleaved rounds, so drift on a shared machine hits every variant alike. Per round:
- image cache hit: `ensure_task_image` for a task whose image exists (one `docker image inspect`);
- container, start to exit: `running_container` + `exec(["true"])` + removal, as a trial does it;
- `docker run --rm --network none IMAGE true`: the daemon's own floor for the same thing;
- bwrap: the same `true` in a bubblewrap sandbox (own namespaces, read-only system, no network).

    .venv/bin/python bench/docker.py [--rounds 30]

Needs a running daemon and the base images (scripts/docker-daemon start; scripts/docker-base-images).
"""

import argparse
import asyncio
import itertools
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from envloop.environments.docker.cli import daemon_version, docker_binary
from envloop.environments.docker.container_spec import ContainerSpec
from envloop.environments.docker.containers import running_container
from envloop.environments.docker.images import BuildRecords, ensure_task_image

BWRAP_ARGS = [
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/bin", "/bin",
    "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64",
    "--proc", "/proc",
    "--dev", "/dev",
    "--tmpfs", "/tmp",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
]  # fmt: skip


async def _timed(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return (time.perf_counter() - started) * 1000


async def _process(*args: str) -> None:
    proc = await asyncio.create_subprocess_exec(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if await proc.wait() != 0:
        raise RuntimeError(f"{args[0]} exited {proc.returncode}")


def _line(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"{name:<44} median {statistics.median(ordered):8.1f} ms   p90 {p90:8.1f} ms   "
        f"mean {statistics.fmean(ordered):8.1f} ms   (n={len(ordered)})"
    )


async def main(rounds: int) -> None:
    print(f"docker {await daemon_version()}, {rounds} interleaved rounds")
    workdir = Path(tempfile.mkdtemp(prefix="envloop-bench-docker-"))
    records = BuildRecords(workdir / "builds")
    environment = workdir / "environment"
    environment.mkdir()
    (environment / "Dockerfile").write_text(
        f"FROM debian:bookworm-slim\nRUN echo {secrets.token_hex(6)} > /id\n"
    )
    digest = "sha256:" + secrets.token_hex(32)
    first = await ensure_task_image(environment, digest, records)
    if first.status != "built":
        raise SystemExit(f"bench image did not build: {first.reason}")
    print(f"first build of the bench image: {first.duration_sec * 1000:.0f} ms")
    bwrap = shutil.which("bwrap")
    spec = ContainerSpec(image=first.image, trial_id="trl_bench", memory_mb=512, pids=256)

    phases: dict[str, list[float]] = {
        "  of which start": [],
        "  of which exec true": [],
        "  of which removal": [],
    }

    async def trial_container() -> None:
        marks = [time.perf_counter()]
        async with running_container(spec) as container:
            marks.append(time.perf_counter())
            result = await container.exec(["true"])
            marks.append(time.perf_counter())
            if result.exit_code != 0:
                raise RuntimeError(f"true exited {result.exit_code}")
        marks.append(time.perf_counter())
        for values, (before, after) in zip(phases.values(), itertools.pairwise(marks), strict=True):
            values.append((after - before) * 1000)

    variants: dict[str, Callable[[], Awaitable[object]]] = {
        "image cache hit (ensure_task_image)": lambda: ensure_task_image(environment, digest, records),
        "container start -> exec true -> removed": trial_container,
        "docker run --rm --network none IMAGE true": lambda: _process(
            docker_binary(), "run", "--rm", "--network", "none", first.image, "true"
        ),
    }
    if bwrap is not None:
        variants["bwrap ... true"] = lambda: _process(bwrap, *BWRAP_ARGS, "true")
    samples: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for work in variants.values():  # warm-up, not counted
            await work()
        for _ in range(rounds):
            for name, work in variants.items():
                samples[name].append(await _timed(work))
    finally:
        subprocess.run([docker_binary(), "rmi", "--force", first.image], capture_output=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    for name, values in samples.items():
        print(_line(name, values))
        if name.startswith("container"):
            for phase, timings in phases.items():
                print(_line(phase, timings[1:]))  # the first was the warm-up
    if bwrap is None:
        print("bwrap not installed: no local sandbox figure")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args().rounds))
