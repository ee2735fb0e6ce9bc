"""Which environment a trial runs in: the job's (or worker's) choice, with `auto` decided per task.

`auto` runs a task in a container when it needs something only a container gives (Dockerfile
instructions the local sandbox does not execute, sidecars, a separate verifier, an allowlist; a FROM
alone does not count: the sandbox's system stands in for the base image) and a Docker daemon
answers; otherwise in the local sandbox, saying why when a container was wanted but no daemon
answered. Any other name is an installed environment plugin's (`catalog`); a
worker without it fails the trial's setup as an environment error saying so.
"""

import time

from envloop.core.trial import TrialSpec
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.catalog import ENVIRONMENT_PROVIDERS, docker_provider
from envloop.environments.docker.cli import DockerUnavailableError, daemon_version
from envloop.environments.features import refused_in, task_features
from envloop.environments.local import LocalEnvironmentProvider
from envloop.environments.provider import EnvironmentProvider
from envloop.plugins import ComponentError
from envloop.tasks.model import HarborTask

_DAEMON_CHECK_SEC = 30.0
_daemon_seen_at = -_DAEMON_CHECK_SEC


async def _daemon_answers() -> bool:
    """Whether a Docker daemon answers; a yes is trusted for a while so each trial does not ask."""
    global _daemon_seen_at  # noqa: PLW0603 (one answer per worker process, refreshed)
    if time.monotonic() - _daemon_seen_at < _DAEMON_CHECK_SEC:
        return True
    try:
        await daemon_version()
    except (DockerUnavailableError, OSError):
        return False
    _daemon_seen_at = time.monotonic()
    return True


async def choose_provider(task: HarborTask, spec: TrialSpec) -> tuple[EnvironmentProvider, str | None]:
    """The provider for this trial, and a warning when `auto` wanted a container it could not have."""
    if spec.environment == "docker":
        return docker_provider(spec), None
    if spec.environment == "local":
        return LocalEnvironmentProvider(), None
    if spec.environment != "auto":
        try:
            return ENVIRONMENT_PROVIDERS.find(spec.environment).component(spec), None
        except ComponentError as exc:
            raise EnvironmentSetupError(
                f"{exc}, on this worker (install the plugin on every worker, then run the trial again)"
            ) from None
    container_only = refused_in(task_features(task), "local")
    needs = container_only[0].detail if container_only else None
    if needs is None:
        return LocalEnvironmentProvider(), None
    if await _daemon_answers():
        return docker_provider(spec), None
    return (
        LocalEnvironmentProvider(),
        f"environment auto: {needs}, and no Docker daemon answers to run it in a container",
    )
