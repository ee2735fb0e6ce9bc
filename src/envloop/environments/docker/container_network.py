"""The network side of one container of a trial (its main container or a sidecar): which networks
it is on in each phase, the proxy its commands are told of, the model gateway's listener open to
it, and what its trial could not reach. Apart from environment.py, which runs the container's
commands and moves its files, so each reads without the other.

- Network policies switch by attaching the container to the worker's shared bridges and detaching
  it (shared_egress.py; the trial's own internal network for sidecars and the model gateway:
  networks.py); a public or allowlist phase adds its proxy's address to the commands' variables
  (egress.py).
- The model gateway is reached, while open, on the trial's internal bridge: a listener of the
  worker's gateway bound to the host's address there, let through the host guard for that bridge
  alone, answering this trial's token alone (firewall.py).
"""

import asyncio
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from envloop.core.destinations import Destination
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.cli import DockerError
from envloop.environments.docker.containers import Container
from envloop.environments.docker.egress import EgressProxies, Unreachable, proxy_hosts
from envloop.environments.docker.firewall import close_gateway_port, open_gateway_port
from envloop.environments.docker.networks import TrialNetworks
from envloop.environments.docker.shared_egress import shared_network, shared_networks
from envloop.environments.task_hosts import named_hosts, naming
from envloop.tasks.phases import NetworkPolicy

if TYPE_CHECKING:
    from envloop.gateway import Listener, ModelGateway  # aiohttp: loaded when a trial first routes a model


class ContainerNetwork:
    """The networks one container of a trial is on, phase by phase, and what its trial reached
    through them."""

    def __init__(
        self,
        container: Container,
        networks: TrialNetworks,
        egress: EgressProxies,
        *,
        sidecars: Mapping[str, Container],
        task_root: Path,
        service: str | None,
    ) -> None:
        self._container = container
        self._networks = networks
        self._egress = egress
        self._sidecars = sidecars
        self._task_root = task_root
        self._service = service
        """The compose service the container is (None: the trial's main container)."""
        self._proxy: dict[str, str] = {}
        self._gateway: tuple[ModelGateway, Listener, str] | None = None
        """The gateway listener open to the container, with its bridge."""
        self._unreachable: list[Unreachable] = []
        """Allowed destinations the trial's proxy could not connect (or its resolvers answer),
        found at the last stop."""

    async def apply(self, policy: NetworkPolicy) -> None:
        """Attach the container to what `policy` needs and detach it from the rest: the worker's
        shared public or allowlist bridge (shared_egress.py), and the trial's internal network
        while it has sidecars or a model gateway."""
        container = self._container.id
        try:
            wanted: set[str] = set()
            if self._sidecars or self._gateway is not None:
                wanted.add(await self._networks.internal())
            if policy.mode in ("public", "allowlist"):
                wanted.add((await shared_network(policy.mode)).name)
            self._proxy = {}
            if (hosts := proxy_hosts(policy)) is not None:
                # A public phase's HTTP(S) goes through an observing proxy (egress.py) to learn of
                # hosts this machine cannot reach; anything else still goes out directly.
                self._proxy = await self._egress.proxy_for(hosts, direct=tuple(self._sidecars))
            attached = set(await self._container.networks())
            for name in sorted(attached - wanted):
                await self._networks.disconnect(container, name)
                await self._egress.leave(name)  # once its port is gone
            internal = self._networks.internal_name
            since = time.time()
            for name in sorted(wanted - attached):
                # `main` names this container on the internal network only, where the trial's
                # containers reach each other (the shared bridges keep them apart).
                aliases = ["main"] if name == internal else None
                await self._networks.connect(container, name, aliases=aliases)
            await self._join_shared(wanted, since)
        except DockerError as exc:
            raise EnvironmentSetupError(
                f"the network could not be switched to {policy.describe()}: {exc}"
            ) from None

    async def resume(self) -> None:
        """Start the stopped container again: it comes back with new ports on its bridges (and
        maybe new addresses), so it is counted on the shared ones anew."""
        since = time.time()
        await self._container.resume()
        await self._join_shared(set(await self._container.networks()), since)

    async def _join_shared(self, attached: set[str], since: float) -> None:
        """Count the running container's requests through the shared proxies as the trial's, on
        each shared bridge it is on and not yet counted on (a container started on one has been
        there since its trial's egress was made)."""
        if self._container.stopped or self._service is not None:
            return  # joined when it runs again (`resume`); a sidecar is on no shared bridge
        for network in shared_networks():
            if network.name in attached and not self._egress.joined(network.name):
                first = since if self._egress.ever_joined else self._egress.created
                await self._egress.join(self._container, network, first)

    def variables(self) -> dict[str, str]:
        """What the current phase's commands are told of its proxy."""
        variables = dict(self._proxy)
        if variables and self._gateway is not None:
            # The gateway is reached directly, never through an allowlist's proxy.
            address = self._gateway[1].host
            for name in ("NO_PROXY", "no_proxy"):
                variables[name] = ",".join(filter(None, [variables.get(name, ""), address]))
        return variables

    @property
    def gateway_open(self) -> bool:
        """Whether a gateway listener is open to the container."""
        return self._gateway is not None

    async def open_gateway(self, gateway: "ModelGateway", trial_id: str) -> str:
        """Open a listener of `gateway` on the trial's internal bridge, let through the host guard;
        its root URL as the container reaches it once attached there (`apply`)."""
        try:
            bridge, address = await self._networks.internal_gateway()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((address, 0))
                sock.listen(64)
            except OSError:
                sock.close()
                raise
            port = int(sock.getsockname()[1])
            await open_gateway_port(bridge, address, port)
            listener = await gateway.add_listener(sock, trial_id=trial_id)
        except (DockerError, OSError) as exc:
            raise EnvironmentSetupError(
                f"the model gateway could not be opened to the container: {exc}"
            ) from None
        self._gateway = (gateway, listener, bridge)
        return f"http://{address}:{port}"

    async def release_gateway(self) -> None:
        """Close the gateway's listener and the guard's opening for it, if open; the container's
        networks stay as they are."""
        if self._gateway is None:
            return
        gateway, listener, bridge = self._gateway
        self._gateway = None
        await gateway.remove_listener(listener)
        await close_gateway_port(bridge, listener.host, listener.port)

    async def after_stop(self) -> None:
        """Once the main container's processes are stopped: out of the shared proxies' count where
        its ports went with them, and the allowed destinations its trial depends on that the
        proxies could not reach noted for `shortfall`. A sidecar answers for none of it."""
        if self._service is not None:
            return
        if self._container.stopped:
            for network in shared_networks():
                await self._egress.leave(network.name)  # its ports went with its processes
        depended_on = await self._depended_on(await self._egress.unreachable())
        self._unreachable += await self._egress.confirmed(depended_on)

    async def contacted(self) -> list[str]:
        """What its trial asked its proxies for so far (`DockerEnvironment.contacted_hosts`)."""
        return await self._egress.contacted()

    def destinations(self) -> list[Destination] | None:
        """What this trial asked its proxies for, counted when its instance was torn down (None
        before, for a trial that used no proxy, and for a sidecar: its main container answers)."""
        return self._egress.record if self._service is None else None

    async def _depended_on(self, missed: list[Unreachable]) -> list[Unreachable]:
        """Of the destinations the trial's proxy could not reach, those the trial depends on: its
        allowlist names them, or its task's files do (task_hosts.py). The rest only the agent (or its
        code, run by the verifier) asked for, and they leave the verdict standing."""
        unlisted = [naming(one.where) for one in missed if not one.listed]
        named = await asyncio.to_thread(named_hosts, self._task_root, unlisted) if unlisted else set()
        return [one for one in missed if one.listed or naming(one.where) in named]

    def shortfall(self) -> str | None:
        """The allowed destinations noted unreachable since the last call, said once (None: none)."""
        if not self._unreachable:
            return None
        missed, self._unreachable = self._unreachable, []
        hosts = ", ".join(sorted({one.where for one in missed if not one.looked_up}))
        names = ", ".join(sorted({one.where for one in missed if one.looked_up}))
        found = []
        if hosts:
            reason = "the trial's proxy could not connect"
            found.append(f"{hosts} could not be reached from this machine ({reason})")
        if names:
            found.append(f"{names} could not be resolved from this machine (its resolvers did not answer)")
        return "; ".join(found)
