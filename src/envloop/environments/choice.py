"""Which environment a trial runs in: the job's (or worker's) choice, with `auto` decided per task.

Every name, built-in or plugin, is looked up in the one catalog (`catalog`). `auto` runs a task in
a container when it needs something only a container gives (Dockerfile instructions the local
sandbox does not execute, sidecars, a separate verifier, an allowlist; a FROM alone does not count:
the sandbox's system stands in for the base image) and the `docker` provider is ready (a daemon
answers); otherwise in the local sandbox, saying why when a container was wanted but no daemon
answered. A name this worker has no provider for fails the trial's setup as an environment error
saying so.
"""

from envloop.core.trial import TrialSpec
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.catalog import ENVIRONMENT_PROVIDERS
from envloop.environments.features import refused_in, task_features
from envloop.environments.provider import EnvironmentProvider, ProviderEntry
from envloop.plugins import ComponentError
from envloop.tasks.model import HarborTask


def _entry(name: str) -> ProviderEntry:
    try:
        return ENVIRONMENT_PROVIDERS.find(name).component
    except ComponentError as exc:
        raise EnvironmentSetupError(
            f"{exc}, on this worker (install the plugin on every worker, then run the trial again)"
        ) from None


async def choose_provider(task: HarborTask, spec: TrialSpec) -> tuple[EnvironmentProvider, str | None]:
    """The provider for this trial, and a warning when `auto` wanted a container it could not have."""
    if spec.environment != "auto":
        return _entry(spec.environment).make(spec), None
    local = _entry("local")
    container_only = refused_in(task_features(task), "local")
    if not container_only:
        return local.make(spec), None
    docker = _entry("docker")
    if docker.ready is None or await docker.ready():
        return docker.make(spec), None
    needs = container_only[0].detail
    warning = f"environment auto: {needs}, and no Docker daemon answers to run it in a container"
    return local.make(spec), warning
