"""The Docker foundation of the `docker` environment: base images, task images, trial containers.

Task images are built once per task digest (`ensure_task_image`); each trial runs in its own
container (`running_container`), reached only through exec and tar copies, never a host mount.
"""

from envloop.environments.docker.base_images import ensure_base_images, honoured_images
from envloop.environments.docker.cli import (
    DockerError,
    DockerUnavailableError,
    daemon_version,
    image_id,
)
from envloop.environments.docker.containers import (
    Container,
    ContainerSpec,
    ExecOutcome,
    running_container,
)
from envloop.environments.docker.images import (
    BuildConfigError,
    BuildNetwork,
    BuildOutcome,
    BuildRecord,
    BuildRecords,
    BuildSettings,
    build_network,
    effective_build_network,
    ensure_task_image,
    read_build_settings,
    task_image,
)
from envloop.environments.docker.orphans import sweep_orphans, trial_containers, worker_identity
from envloop.environments.docker.transfer import CopyOutReport, Owner

__all__ = [
    "BuildConfigError",
    "BuildNetwork",
    "BuildOutcome",
    "BuildRecord",
    "BuildRecords",
    "BuildSettings",
    "Container",
    "ContainerSpec",
    "CopyOutReport",
    "DockerError",
    "DockerUnavailableError",
    "ExecOutcome",
    "Owner",
    "build_network",
    "daemon_version",
    "effective_build_network",
    "ensure_base_images",
    "ensure_task_image",
    "honoured_images",
    "image_id",
    "read_build_settings",
    "running_container",
    "sweep_orphans",
    "task_image",
    "trial_containers",
    "worker_identity",
]
