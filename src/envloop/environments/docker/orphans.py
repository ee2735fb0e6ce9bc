"""Finding envloop's containers by label, and removing those whose worker is gone.

Each trial container is labelled `envloop.managed=1`, `envloop.trial=<trial id>` and
`envloop.worker=<host>:<pid>:<start time>` (the start time, so a reused pid is not mistaken for the
worker that owned the container). A worker killed mid-trial cannot remove its containers;
`sweep_orphans`, run when a worker starts, removes those of workers on this host that are gone.
Containers of other hosts sharing the daemon are left to their own workers (`envloop.liveness`
says which host this is: the test suite's parallel processes count as hosts of their own, so one's
sweep never races another's killed worker).
"""

import contextlib
import json
from typing import Any

from envloop.environments.docker.engine import NotFoundError, engine
from envloop.liveness import identity_gone

MANAGED_LABEL = "envloop.managed"
TRIAL_LABEL = "envloop.trial"
WORKER_LABEL = "envloop.worker"


async def remove_container(name: str) -> None:
    """Remove a container and its anonymous volumes, running or not; an absent one is fine."""
    with contextlib.suppress(NotFoundError):
        await engine().request("DELETE", f"/containers/{name}", params={"force": "1", "v": "1"})


async def labelled_containers(label: str) -> list[dict[str, Any]]:
    """Every container (running or not) carrying `label` (`key=value`), as the daemon lists them."""
    filters = json.dumps({"label": [label]})
    found = await engine().json("GET", "/containers/json", params={"all": "1", "filters": filters})
    return list(found or [])


async def sweep_orphans() -> list[str]:
    """Remove the containers (then the networks) whose worker ran on this host and is gone;
    returns their names.

    Run when a worker starts (a worker that was killed could not remove its own).
    """
    removed: list[str] = []
    for container in await labelled_containers(f"{MANAGED_LABEL}=1"):
        identity = (container.get("Labels") or {}).get(WORKER_LABEL, "")
        name = str((container.get("Names") or [container["Id"]])[0]).lstrip("/")
        if identity_gone(identity):
            await remove_container(container["Id"])
            removed.append(name)
    # A trial's networks go once its containers have (a network in use cannot be removed).
    filters = json.dumps({"label": [f"{MANAGED_LABEL}=1"]})
    for network in await engine().json("GET", "/networks", params={"filters": filters}) or []:
        if identity_gone((network.get("Labels") or {}).get(WORKER_LABEL, "")):
            with contextlib.suppress(NotFoundError):
                await engine().request("DELETE", f"/networks/{network['Id']}")
                removed.append(str(network.get("Name")))
    return removed


async def trial_containers(trial_id: str) -> list[str]:
    """Names of the containers (running or not) labelled with this trial."""
    return [
        str((c.get("Names") or [c["Id"]])[0]).lstrip("/")
        for c in await labelled_containers(f"{TRIAL_LABEL}={trial_id}")
    ]
