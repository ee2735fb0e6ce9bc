"""The Docker foundation of the `docker` environment: base images, task images, trial containers.

Task images are built once per task digest (`ensure_task_image`); each trial runs in its own
container (`running_container`), reached only through exec and tar copies, never a host mount.
Every Dockerfile envloop builds (a task's, a separate verifier's, a sidecar's) goes through
`prepare_dockerfile` (the operator's substitutions, `# syntax=` lines), and `missing_images` says
which of its images this machine can neither have nor make, with the reason.
"""

from envloop.environments.docker.availability import MissingImage, missing_images, present_images
from envloop.environments.docker.base_images import ensure_base_images, honoured_images
from envloop.environments.docker.cli import (
    DockerError,
    DockerUnavailableError,
    daemon_version,
)
from envloop.environments.docker.containers import (
    Container,
    ContainerSpec,
    ExecOutcome,
    running_container,
)
from envloop.environments.docker.engine import image_id
from envloop.environments.docker.images import (
    BuildConfigError,
    BuildNetwork,
    BuildOutcome,
    BuildRecord,
    BuildRecords,
    BuildSettings,
    build_network,
    build_plan,
    effective_build_network,
    ensure_task_image,
    image_substitutes,
    read_build_settings,
    task_image,
)
from envloop.environments.docker.orphans import sweep_orphans, trial_containers, worker_identity
from envloop.environments.docker.prepare import PreparedDockerfile, Substitution, prepare_dockerfile
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
    "MissingImage",
    "Owner",
    "PreparedDockerfile",
    "Substitution",
    "build_network",
    "build_plan",
    "daemon_version",
    "effective_build_network",
    "ensure_base_images",
    "ensure_task_image",
    "honoured_images",
    "image_id",
    "image_substitutes",
    "missing_images",
    "prepare_dockerfile",
    "present_images",
    "read_build_settings",
    "running_container",
    "sweep_orphans",
    "task_image",
    "trial_containers",
    "worker_identity",
]
