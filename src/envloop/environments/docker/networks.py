"""The networks of one trial's own, made only when its sidecars, its model gateway or a closed
baseline need one: `public` and `allowlist` phases use the worker's shared bridges instead
(shared_egress.py), so a plain public trial makes none.

- No phase asks for a network and the task has no sidecars: the container starts on `none` and
  nothing is made (the common case costs nothing).
- The trial has sidecars, or opens a model gateway, or starts closed with a later phase that opens:
  it gets an internal bridge of its own (`eli…`, no route out): its sidecars live there, reached by
  name, and so does the gateway's listener; the main container is attached to it while it needs it.
- A sidecar of a `public` trial is also attached to a public bridge of the trial's own (`elp…`,
  masqueraded, no traffic between containers, kept from the host by firewall.py).

Every network carries the trial's labels, so a crashed worker's are swept with its containers.
"""

import asyncio
import contextlib
import hashlib

from envloop.environments.docker.engine import NotFoundError, engine
from envloop.environments.docker.firewall import INTERNAL_PREFIX, PUBLIC_PREFIX, ensure_host_guard
from envloop.environments.docker.orphans import MANAGED_LABEL, TRIAL_LABEL, WORKER_LABEL
from envloop.liveness import process_identity


def _bridge_name(prefix: str, run_id: str, role: str) -> str:
    """A bridge interface name of at most 15 characters, unique per run and role."""
    return prefix + hashlib.sha256(f"{run_id}/{role}".encode()).hexdigest()[:12]


class TrialNetworks:
    """The networks one run of a trial made; `remove` takes them all away."""

    def __init__(self, run_id: str, trial_id: str) -> None:
        self._run_id = run_id
        self._labels = {MANAGED_LABEL: "1", TRIAL_LABEL: trial_id, WORKER_LABEL: process_identity()}
        self._made: dict[str, str] = {}
        """Network name by role (`internal`, `public`, ...)."""
        self._making = asyncio.Lock()
        """The container and its proxy start at once, and may both ask for the same network."""

    @property
    def internal_name(self) -> str | None:
        return self._made.get("internal")

    async def internal(self) -> str:
        return await self._network("internal", internal=True)

    async def public(self) -> str:
        return await self._network("public", internal=False)

    async def _network(self, role: str, *, internal: bool) -> str:
        async with self._making:
            if role not in self._made:
                self._made[role] = await self._create(role, internal=internal)
            return self._made[role]

    async def _create(self, role: str, *, internal: bool) -> str:
        await ensure_host_guard()
        prefix = INTERNAL_PREFIX if internal else PUBLIC_PREFIX
        name = f"envloop-{self._run_id}-{role}"
        options = {"com.docker.network.bridge.name": _bridge_name(prefix, self._run_id, role)}
        if not internal:
            options["com.docker.network.bridge.enable_icc"] = "false"
        await engine().json(
            "POST",
            "/networks/create",
            body={
                "Name": name,
                "Driver": "bridge",
                "Internal": internal,
                "CheckDuplicate": True,
                "Labels": self._labels,
                "Options": options,
            },
        )
        return name

    async def internal_gateway(self) -> tuple[str, str]:
        """The internal bridge's interface and the host's address on it (made if need be)."""
        name = await self.internal()
        found = await engine().json("GET", f"/networks/{name}")
        for config in (found.get("IPAM") or {}).get("Config") or []:
            address = str(config.get("Gateway") or "")
            if address and ":" not in address:
                return _bridge_name(INTERNAL_PREFIX, self._run_id, "internal"), address
        raise NotFoundError(f"network {name} has no IPv4 gateway address")

    async def connect(self, container: str, network: str, aliases: list[str] | None = None) -> None:
        body: dict[str, object] = {"Container": container}
        if aliases:
            body["EndpointConfig"] = {"Aliases": aliases}
        await engine().request("POST", f"/networks/{network}/connect", body=body)

    async def disconnect(self, container: str, network: str) -> None:
        with contextlib.suppress(NotFoundError):
            await engine().request(
                "POST", f"/networks/{network}/disconnect", body={"Container": container, "Force": True}
            )

    async def remove(self) -> list[str]:
        """Remove every network made (after their containers); problems, if any."""
        found = await asyncio.gather(*(_remove(name) for name in self._made.values()))
        self._made.clear()
        return [problem for problem in found if problem is not None]


async def _remove(network: str) -> str | None:
    try:
        await engine().request("DELETE", f"/networks/{network}")
    except NotFoundError:
        return None
    except Exception as exc:
        return f"network {network} could not be removed: {exc}"
    return None
