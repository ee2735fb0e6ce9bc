"""The bare floor of a trivial trial: the same two processes (agent `true`, verifier script) spawned
straight from asyncio, directly or inside bwrap, at the same concurrency as the run they sit beside.

Shared by `bench/trials.py` and `bench/peers/run.py`: whatever a harness adds on top of these
processes is its own cost.
"""

import asyncio
import resource
import time
from pathlib import Path

VERIFIER = 'echo 1 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n'


def cpu_seconds() -> float:
    """CPU of this process and of every child it has waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def bwrap_prefix(workdir: Path) -> list[str]:
    """A bwrap sandbox as tight as envloop's: every namespace unshared, system directories read-only."""
    binds = [
        arg
        for d in ("/usr", "/bin", "/lib", "/lib64", "/etc")
        if Path(d).exists()
        for arg in ("--ro-bind", d, d)
    ]
    return [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *binds,
        "--bind",
        str(workdir),
        str(workdir),
        "--",
    ]


async def floor(trials: int, capacity: int, prefix: list[str], workdir: Path) -> tuple[float, float]:
    """Wall and CPU seconds to spawn the processes of `trials` trials, `capacity` at a time."""
    script = workdir / "test.sh"
    script.write_text(VERIFIER)
    (workdir / "verifier").mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "ENVLOOP_LOGS_DIR": str(workdir)}
    gate = asyncio.Semaphore(capacity)

    async def one() -> None:
        async with gate:
            for argv in (["bash", "-c", "true"], ["bash", str(script)]):
                proc = await asyncio.create_subprocess_exec(*prefix, *argv, env=env)
                await proc.wait()

    start_wall, start_cpu = time.perf_counter(), cpu_seconds()
    await asyncio.gather(*(one() for _ in range(trials)))
    return time.perf_counter() - start_wall, cpu_seconds() - start_cpu


def run_floor(trials: int, capacity: int, sandbox: str, workdir: Path) -> tuple[float, float]:
    """`floor` for sandbox `plain` or `bwrap`, in a fresh directory under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = bwrap_prefix(workdir) if sandbox == "bwrap" else []
    return asyncio.run(floor(trials, capacity, prefix, workdir))
