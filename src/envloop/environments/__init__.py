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
from envloop.environments.limits import Limits
from envloop.environments.local import LocalEnvironment, LocalEnvironmentProvider

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
