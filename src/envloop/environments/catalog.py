"""Environment providers by name, built-in and plugin alike: each is a `ProviderEntry`
(environments/provider.py). The built-ins register where they are defined (`LOCAL` in
local/provider.py, `DOCKER` in docker/registration.py); installed plugins under the entry point
group `envloop.environments` give an EnvironmentProvider class (instantiated without arguments) or
an instance, adopted into an entry here. A job or worker names one with `--environment`; `auto` is
a choice between the built-ins (`choice`), not a provider. Providers are found by installed name
only, never by a `module:Name` reference: a job's environment is API input."""

from envloop.core.trial import TrialSpec
from envloop.environments.docker.registration import DOCKER
from envloop.environments.local.provider import LOCAL
from envloop.environments.provider import EnvironmentProvider, ProviderEntry
from envloop.plugins import Catalog, ShapeError, instantiate


def _builtins() -> dict[str, ProviderEntry]:
    return {"local": LOCAL, "docker": DOCKER}


def adopt_provider(loaded: object) -> ProviderEntry:
    """A plugin's provider as an entry: the one instance for every trial, its `sweep_leftovers`
    (when it has one) run when a worker starts."""
    provider = instantiate(loaded)
    if not callable(getattr(provider, "instance", None)):
        raise ShapeError("it has no instance(task, spec) method")

    def make(spec: TrialSpec) -> EnvironmentProvider:
        return provider  # type: ignore[return-value]  # checked above: it has instance()

    sweep = getattr(provider, "sweep_leftovers", None)
    return ProviderEntry(make=make, sweep_leftovers=sweep if callable(sweep) else None)


ENVIRONMENT_PROVIDERS: Catalog[ProviderEntry] = Catalog(
    "environment", "envloop.environments", _builtins, adopt_provider
)
