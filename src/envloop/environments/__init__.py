"""Where trial commands run: the environment contract (`Environment`, `EnvironmentProvider`), the
values it speaks in, and the local (bwrap / plain) provider; Docker's provider lives in docker/.
See docs/design/environment-contract.md."""

from envloop.environments.base import (
    NO_MOUNTS,
    EnvironmentSetupError,
    ExecResult,
    Mount,
    Mounts,
    VisiblePaths,
)
from envloop.environments.contract import Environment
from envloop.environments.local import Limits, LocalEnvironment, LocalEnvironmentProvider
from envloop.environments.provider import EnvironmentProvider, ProviderEntry

__all__ = [
    "NO_MOUNTS",
    "Environment",
    "EnvironmentProvider",
    "EnvironmentSetupError",
    "ExecResult",
    "Limits",
    "LocalEnvironment",
    "LocalEnvironmentProvider",
    "Mount",
    "Mounts",
    "ProviderEntry",
    "VisiblePaths",
]
