"""Environment providers by name: the built-in `local` sandbox and `docker` containers, and those
of installed plugins (entry point group `envloop.environments`: an EnvironmentProvider class,
instantiated without arguments, or an instance). A job or worker names one with `--environment`;
`auto` is a choice between the built-ins (`choice`), not a provider. Providers are found by
installed name only, never by a `module:Name` reference: a job's environment is API input."""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.core.trial import TrialSpec
from envloop.environments.local import LocalEnvironmentProvider
from envloop.environments.provider import EnvironmentProvider
from envloop.plugins import Catalog, ShapeError, instantiate

if TYPE_CHECKING:
    from envloop.environments.docker.provider import DockerEnvironmentProvider

ProviderFactory = Callable[[TrialSpec], EnvironmentProvider]


def docker_provider(spec: TrialSpec) -> "DockerEnvironmentProvider":
    """Docker's provider for a trial; its client and image builder load with the first one, not for
    a job's submission, which only checks that the name is known."""
    from envloop.environments.docker.images import BuildRecords  # noqa: PLC0415
    from envloop.environments.docker.provider import DockerEnvironmentProvider  # noqa: PLC0415

    return DockerEnvironmentProvider(BuildRecords(spec.builds_dir or Path(spec.instance_root) / "builds"))


def _local(spec: TrialSpec) -> EnvironmentProvider:
    return LocalEnvironmentProvider()


def _builtins() -> dict[str, ProviderFactory]:
    return {"local": _local, "docker": docker_provider}


def adopt_provider(loaded: object) -> ProviderFactory:
    provider = instantiate(loaded)
    if not callable(getattr(provider, "instance", None)):
        raise ShapeError("it has no instance(task, spec) method")

    def factory(spec: TrialSpec) -> EnvironmentProvider:
        return provider  # type: ignore[return-value]  # checked above: it has instance()

    return factory


ENVIRONMENT_PROVIDERS: Catalog[ProviderFactory] = Catalog(
    "environment", "envloop.environments", _builtins, adopt_provider
)
