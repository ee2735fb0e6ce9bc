"""The task features envloop does not honour everywhere, found once when a task is pushed.

A Harbor task can ask for things only some environments give (a Dockerfile's `RUN` steps run only
in a container) or that no environment of envloop gives (GPUs, compose sidecars, a separate verifier
container, an egress allowlist). Run without them, a task measures the environment rather than the
agent, and its zeros read as the agent's failures. So every such feature is named at push (stored
with the revision, shown by `el dataset show`), and a job whose environment cannot honour a
feature the task needs is refused at submission (services/jobs.py) unless the user chooses to leave
those tasks out. The same detection backs the check every trial makes when it starts
(environments/policy.py), so push, submission and trial never disagree.
"""

from envloop.environments.base import EnvironmentSetupError
from envloop.environments.instance import read_plan
from envloop.tasks.model import HarborTask
from envloop.wire.datasets import ENVIRONMENTS, EnvironmentName, TaskFeature

__all__ = ["ENVIRONMENTS", "EnvironmentName", "TaskFeature", "task_features"]

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
# Dockerfile instructions the local sandbox reads itself: a FROM alone is stood in for by the host's
# system, and WORKDIR, ENV, COPY and ADD of the build context are applied.
_LOCAL_INSTRUCTIONS = {"FROM"}


def _positive_number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def task_features(task: HarborTask) -> list[TaskFeature]:
    """Every feature of `task` that some environment does not honour, in a fixed order."""
    config = task.config
    environment = config.environment.model_extra or {}
    verifier = config.verifier.model_extra or {}
    found: list[TaskFeature] = []

    gpus = _positive_number(environment.get("gpus"))
    if gpus is not None:
        found.append(
            TaskFeature(
                name="gpus",
                label="GPUs",
                detail=f"[environment] gpus = {gpus:g}",
                environments=[],
                required=True,
                amount=gpus,
            )
        )
    compose = next((name for name in COMPOSE_FILES if (task.environment_dir / name).is_file()), None)
    if compose is not None:
        found.append(
            TaskFeature(
                name="compose",
                label="docker-compose sidecar services",
                detail=f"environment/{compose} (sidecar services)",
                environments=[],
                required=True,
            )
        )
    mode = verifier.get("environment_mode")
    separate = mode == "separate" or (mode is None and isinstance(verifier.get("environment"), dict))
    if separate or mode not in (None, "shared", "separate"):
        shown = f"environment_mode = {str(mode)[:40]!r}" if mode is not None else "[verifier.environment]"
        found.append(
            TaskFeature(
                name="separate-verifier",
                label="a separate verifier environment",
                detail=f"[verifier] {shown} (a separate verifier environment)",
                environments=[],
                required=True,
            )
        )
    if verifier.get("collect"):
        found.append(
            TaskFeature(
                name="collect-hooks",
                label="verifier collect hooks",
                detail="[[verifier.collect]] (commands run before the verifier)",
                environments=[],
                required=True,
            )
        )
    if config.environment.network_mode == "allowlist":
        found.append(
            TaskFeature(
                name="network-allowlist",
                label="a network allowlist",
                detail='[environment] network_mode = "allowlist"',
                environments=[],
                required=True,
            )
        )
    if environment.get("mcp_servers"):
        found.append(
            TaskFeature(
                name="mcp-servers",
                label="MCP servers for the agent",
                detail="[[environment.mcp_servers]] (servers offered to the agent)",
                environments=[],
                required=False,
            )
        )
    found += _dockerfile_features(task)
    return found


def _dockerfile_features(task: HarborTask) -> list[TaskFeature]:
    image = task.config.environment.model_extra or {}
    prebuilt = image.get("docker_image")
    if isinstance(prebuilt, str) and prebuilt and not (task.environment_dir / "Dockerfile").is_file():
        return [
            TaskFeature(
                name="prebuilt-image",
                label="a prebuilt docker_image",
                detail=f"[environment] docker_image = {prebuilt[:80]!r}",
                environments=["docker"],
                required=True,
            )
        ]
    try:
        skipped = {name: n for name, n in read_plan(task).skipped.items() if name not in _LOCAL_INSTRUCTIONS}
    except EnvironmentSetupError:
        return []  # an unreadable Dockerfile fails its build or its local setup, naming itself
    if not skipped:
        return []
    listed = ", ".join(f"{count} {name}" for name, count in sorted(skipped.items()))
    return [
        TaskFeature(
            name="dockerfile",
            label="Dockerfile instructions only a container runs",
            detail=f"environment/Dockerfile instructions the local sandbox does not execute ({listed})",
            environments=["docker"],
            required=True,
        )
    ]


def refused_in(features: list[TaskFeature], environment: EnvironmentName) -> list[TaskFeature]:
    """The required features `environment` cannot give."""
    return [f for f in features if f.required and not f.honoured_by(environment)]
