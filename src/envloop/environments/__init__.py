"""Where trial commands run: the Environment protocol and the local (bwrap / plain) provider."""

from envloop.environments.base import (
    NO_MOUNTS,
    Environment,
    EnvironmentProvider,
    EnvironmentSetupError,
    ExecResult,
    Mount,
    Mounts,
    VisiblePaths,
)
from envloop.environments.local import LocalEnvironment, LocalEnvironmentProvider
from envloop.environments.local.limits import Limits

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
    "VisiblePaths",
]
