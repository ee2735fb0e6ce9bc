"""Finding envloop's containers by label, and removing those whose worker is gone.

Each trial container is labelled `envloop.managed=1`, `envloop.trial=<trial id>` and
`envloop.worker=<host>:<pid>:<start time>` (the start time, so a reused pid is not mistaken for the
worker that owned the container). A worker killed mid-trial cannot remove its containers;
`sweep_orphans`, run when a worker starts, removes those of workers on this host that are gone.
Containers of other hosts sharing the daemon are left to their own workers.
"""

import socket

import psutil

from envloop.environments.docker.cli import DockerError, docker, first_line

MANAGED_LABEL = "envloop.managed"
TRIAL_LABEL = "envloop.trial"
WORKER_LABEL = "envloop.worker"


def worker_identity(pid: int | None = None) -> str:
    """`host:pid:start-time` of a process (this one by default), as put in the worker label."""
    process = psutil.Process(pid)
    return f"{socket.gethostname()}:{process.pid}:{int(process.create_time())}"


def owner_gone(identity: str) -> bool:
    """True when the labelled worker ran on this host and that exact process is no longer alive."""
    host, _, rest = identity.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        process = psutil.Process(int(pid_text))
        alive = process.status() != psutil.STATUS_ZOMBIE
        return not alive or str(int(process.create_time())) != started
    except psutil.NoSuchProcess:
        return True


async def remove_container(name: str) -> None:
    """Remove a container and its anonymous volumes, running or not; an absent one is fine."""
    result = await docker(["rm", "--force", "--volumes", name], check=False, timeout=120)
    if result.returncode != 0 and "No such container" not in result.stderr:
        raise DockerError(f"docker rm: {first_line(result.stderr)}")


async def sweep_orphans() -> list[str]:
    """Remove the containers whose worker ran on this host and is gone; returns their names.

    Run when a worker starts (a worker that was killed could not remove its own).
    """
    listed = await docker(
        [
            "ps",
            "--all",
            "--no-trunc",
            "--filter",
            f"label={MANAGED_LABEL}=1",
            "--format",
            f'{{{{.Names}}}}\t{{{{.Label "{WORKER_LABEL}"}}}}',
        ]
    )
    removed: list[str] = []
    for line in listed.stdout.decode().splitlines():
        name, _, identity = line.partition("\t")
        if name and owner_gone(identity.strip()):
            await remove_container(name)
            removed.append(name)
    return removed


async def trial_containers(trial_id: str) -> list[str]:
    """Names of the containers (running or not) labelled with this trial."""
    listed = await docker(
        ["ps", "--all", "--filter", f"label={TRIAL_LABEL}={trial_id}", "--format", "{{.Names}}"]
    )
    return [line for line in listed.stdout.decode().splitlines() if line]
