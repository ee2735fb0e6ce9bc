"""The `docker` provider as the catalog holds it: made per trial, ready when a daemon answers, and
sweeping the containers and networks of workers on this host that are gone.

Everything Docker is imported inside the functions: naming the provider (a job's submission, `el
plugins`) must not load the client, the image builder or the container machinery.
"""

import asyncio
import sys
import time
from pathlib import Path

from envloop.core.trial import TrialSpec
from envloop.environments.provider import EnvironmentProvider, ProviderEntry

_DAEMON_CHECK_SEC = 30.0
_daemon_seen_at = -_DAEMON_CHECK_SEC


def docker_provider(spec: TrialSpec) -> EnvironmentProvider:
    """Docker's provider for a trial, recording its image builds beside the trial's instances
    unless the spec names a builds directory."""
    from envloop.environments.docker.images import BuildRecords  # noqa: PLC0415
    from envloop.environments.docker.provider import DockerEnvironmentProvider  # noqa: PLC0415

    return DockerEnvironmentProvider(BuildRecords(spec.builds_dir or Path(spec.instance_root) / "builds"))


async def daemon_answers() -> bool:
    """Whether a Docker daemon answers; a yes is trusted for a while so each trial does not ask."""
    from envloop.environments.docker.cli import DockerUnavailableError, daemon_version  # noqa: PLC0415

    global _daemon_seen_at  # noqa: PLW0603 (one answer per worker process, refreshed)
    if time.monotonic() - _daemon_seen_at < _DAEMON_CHECK_SEC:
        return True
    try:
        await daemon_version()
    except (DockerUnavailableError, OSError):
        return False
    _daemon_seen_at = time.monotonic()
    return True


async def sweep_leftovers() -> list[str]:
    """Remove the trial containers, their cgroups, shared networks and firewall rules of workers on
    this host that died (they could not remove their own); without a Docker daemon there are none,
    and where not even its socket exists, the Engine API client (0.2 s to load and set up, at every
    worker process's start) is not loaded to find that out."""
    from envloop.environments.docker.daemon_socket import socket_path  # noqa: PLC0415

    if not Path(socket_path()).exists():
        return []
    from envloop.environments.docker.bridge_rules import sweep_rules  # noqa: PLC0415
    from envloop.environments.docker.cli import DockerError  # noqa: PLC0415
    from envloop.environments.docker.orphans import sweep_orphans  # noqa: PLC0415
    from envloop.environments.docker.trial_cgroup import sweep_trial_cgroups  # noqa: PLC0415

    try:
        removed = await sweep_orphans()  # first: a cgroup goes once its containers have
        removed += await asyncio.to_thread(sweep_trial_cgroups)
        rules = await sweep_rules()
    except (DockerError, OSError):
        return []
    return [*removed, f"{rules} firewall rule(s)"] if rules else removed


_SHARED_HOLDERS = (
    "envloop.environments.docker.shared_egress",
    "envloop.environments.docker.shared_observer",
)
"""The modules that hold what trials share: a process that never loaded them shared nothing."""


async def close_shared() -> list[str]:
    """Remove the bridges and egress proxies this worker's trials shared, with their rules. A worker
    whose trials never shared any (every local worker) has nothing to close, and is spared loading
    the container machinery to find that out (0.14 s of CPU at each worker process's exit)."""
    if not any(name in sys.modules for name in _SHARED_HOLDERS):
        return []
    from envloop.environments.docker.cli import DockerError  # noqa: PLC0415
    from envloop.environments.docker.shared_egress import close_shared_egress, shared_in_use  # noqa: PLC0415

    if not shared_in_use():
        return []
    try:
        return await close_shared_egress()
    except (DockerError, OSError) as exc:
        return [str(exc)]


DOCKER = ProviderEntry(
    make=docker_provider, ready=daemon_answers, sweep_leftovers=sweep_leftovers, close_shared=close_shared
)
