"""How an agent inside a trial's environment reaches its model: through the worker's gateway.

A model's key never enters a sandbox. An agent that calls its model from inside (`AgentInfo
.calls_model_inside`: Claude Code and the other CLIs, the `command` agent) is given, in place of
the profile's `MODEL_BASE_URL` and `MODEL_API_KEY`, the gateway's address as the environment
reaches it and a token of the trial's own; an agent that calls its model from the worker
(`AgentInfo.model_calls_from`: terminus-2) is given the gateway's own loopback address, so that
its calls are recorded as every other agent's. The gateway checks the token, adds the real key,
forwards to the profile's endpoint and records every call as a model step, merged into the trial's
trajectory when the agent phase ends (an agent that also reports its model calls leaves that to
the gateway). The route is open for the agent phase only: no verifier reaches the gateway.

One gateway per worker process (per event loop), running while any agent phase has a route. An
upstream on a private address (the worker's own loopback, its network) is reached only where the
operator allows it: `ENVLOOP_MODEL_PRIVATE_UPSTREAM=allow` is the default on one's own machine,
and `el serve` beyond loopback gives its workers `deny` unless the operator sets it.
"""

import asyncio
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from envloop.core.status import ErrorType
from envloop.core.trajectory import TrajectoryRecorder
from envloop.core.trial import TrialSpec
from envloop.environments import Environment, EnvironmentSetupError
from envloop.environments.base import trial_settings
from envloop.environments.shielded import finish_even_if_cancelled
from envloop.models.settings import ModelProtocol
from envloop.settings import env_name

if TYPE_CHECKING:
    # The gateway (aiohttp) loads with a worker's first model route, not with every runner import.
    from envloop.gateway import GatewaySession, ModelGateway, Upstream

PRIVATE_UPSTREAM_VARIABLE = env_name("model_private_upstream")
_GATEWAYS: dict[asyncio.AbstractEventLoop, "_Shared"] = {}


def private_upstreams_allowed() -> bool:
    return trial_settings().model_private_upstream == "allow"


@dataclass
class _Shared:
    """A loop's gateway, its start (every route waits for it, however many arrive while it runs)
    and the routes that use it or wait for it."""

    gateway: "ModelGateway"
    started: "asyncio.Task[None]"
    routes: int = 0


async def _acquire() -> _Shared:
    """The running event loop's gateway once it listens, started by its first route.

    Trials that start together all ask at once: the first registers the gateway and its start,
    every later one awaits that same start, so none is handed a gateway that is not listening yet.
    A start that fails fails for every route that waited for it and is forgotten at once: the next
    route starts a new gateway."""
    from envloop.gateway import GatewaySettings, ModelGateway  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    shared = _GATEWAYS.get(loop)
    if shared is None:
        gateway = ModelGateway(GatewaySettings(allow_private_upstream=private_upstreams_allowed()))
        started = loop.create_task(gateway.start(), name="model gateway start")
        shared = _GATEWAYS[loop] = _Shared(gateway, started)
        started.add_done_callback(functools.partial(_forget_failed, loop, shared))
    shared.routes += 1
    try:
        # Shielded: a route cancelled while it waits leaves the start to the others.
        await asyncio.shield(shared.started)
    except BaseException:
        await _release(shared)
        raise
    return shared


def _forget_failed(loop: asyncio.AbstractEventLoop, shared: _Shared, started: "asyncio.Task[None]") -> None:
    if (started.cancelled() or started.exception() is not None) and _GATEWAYS.get(loop) is shared:
        del _GATEWAYS[loop]


async def _release(shared: _Shared) -> None:
    """One route fewer; the last one stops the gateway (an idle worker holds no listener, and an
    event loop that ends leaves nothing open), once its start has ended, even when the route
    releasing it is being cancelled."""
    shared.routes -= 1
    if shared.routes:
        return
    loop = asyncio.get_running_loop()
    if _GATEWAYS.get(loop) is shared:
        del _GATEWAYS[loop]
    await finish_even_if_cancelled(_stop(shared))


async def _stop(shared: _Shared) -> None:
    await asyncio.wait([shared.started])
    await shared.gateway.stop()


@dataclass
class ModelRoute:
    """One agent phase's way to its model: the session, and the spec the agent is given."""

    session: "GatewaySession"
    spec: TrialSpec
    first_step: int
    """Where the agent phase's steps begin in the trajectory (the gateway's are merged from here)."""
    shared: _Shared
    """The gateway the route holds until it closes."""
    environment_opened: bool = True
    """The environment's commands reach the gateway (closed with the route); False for an agent
    that calls its model from the worker, which reaches the gateway's own loopback listener."""


class RouteRefused(Exception):
    """The agent phase cannot reach its model; `kind` is whose problem that is."""

    def __init__(
        self, kind: Literal[ErrorType.MODEL_ERROR, ErrorType.ENVIRONMENT_ERROR], message: str
    ) -> None:
        super().__init__(message)
        self.kind = kind


def _upstream(spec: TrialSpec, protocol: ModelProtocol) -> "Upstream | None":
    params = spec.params
    base_url = params.get("MODEL_BASE_URL", "").strip()
    if not base_url:
        return None
    from envloop.gateway import Upstream  # noqa: PLC0415

    named = params.get("MODEL_PROTOCOL", "").strip()
    if named:
        protocol = "anthropic" if named == "anthropic" else "openai"
    try:
        return Upstream(
            protocol=protocol,
            base_url=base_url,
            api_key=params.get("MODEL_API_KEY") or None,
            model=params.get("MODEL_NAME") or None,
        )
    except ValueError as exc:
        reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise RouteRefused(ErrorType.MODEL_ERROR, f"MODEL_BASE_URL cannot be used: {reason}") from None


def without_model_key(spec: TrialSpec, warnings: list[str]) -> TrialSpec:
    """The spec of an agent that calls its model from inside but names no endpoint for the gateway:
    its key stays out of the environment all the same."""
    if not spec.params.get("MODEL_API_KEY"):
        return spec
    warnings.append(
        "MODEL_API_KEY was not given to the agent: without MODEL_BASE_URL no gateway can carry it"
    )
    params = {name: value for name, value in spec.params.items() if name != "MODEL_API_KEY"}
    return spec.model_copy(update={"params": params})


async def open_route(
    environment: Environment | None,
    spec: TrialSpec,
    recorder: TrajectoryRecorder,
    protocol: ModelProtocol,
    max_calls: int | None = None,
) -> ModelRoute | None:
    """Open the gateway to the agent phase, or None when the profile names no model endpoint;
    `max_calls` bounds its model calls (for an agent with no step limit of its own). The gateway
    is opened to `environment`, whose commands call the model; without one (an agent that calls
    its model from the worker) the agent is given the gateway's own address, and nothing inside
    the environment reaches it."""
    upstream = _upstream(spec, protocol)
    if upstream is None:
        return None
    # The gateway (aiohttp) loads with the first trial that has a model to reach, not for every agent
    # that could call one.
    from envloop.gateway import UpstreamRefused  # noqa: PLC0415

    shared = await _acquire()
    gateway = shared.gateway
    try:
        session = gateway.open_session(spec.trial_id, upstream, max_calls)
    except UpstreamRefused as exc:
        await _release(shared)
        raise RouteRefused(
            ErrorType.MODEL_ERROR,
            f"the model endpoint is refused: {exc} "
            f"({PRIVATE_UPSTREAM_VARIABLE}=allow lets an operator allow it)",
        ) from None
    if environment is None:
        base = session.base_url
    else:
        try:
            root = await environment.open_gateway(gateway, spec.trial_id)
        except BaseException as exc:
            session.close()
            await _release(shared)
            if isinstance(exc, EnvironmentSetupError):
                raise RouteRefused(ErrorType.ENVIRONMENT_ERROR, str(exc)) from None
            raise
        base = f"{root}/v1" if upstream.protocol == "openai" else root
    params = {**spec.params, "MODEL_BASE_URL": base, "MODEL_API_KEY": session.token}
    if upstream.protocol == "anthropic" or spec.params.get("MODEL_PROTOCOL"):
        params["MODEL_PROTOCOL"] = upstream.protocol
    route_spec = spec.model_copy(update={"params": params})
    return ModelRoute(
        session=session,
        spec=route_spec,
        first_step=len(recorder.trajectory.steps),
        shared=shared,
        environment_opened=environment is not None,
    )


async def close_route(route: ModelRoute, environment: Environment, recorder: TrajectoryRecorder) -> None:
    """End the agent's access to its model and merge the calls it made into the trajectory."""
    route.session.close()
    try:
        if route.environment_opened:
            await environment.close_gateway()
    finally:
        recorder.merge(route.session.steps(), since=route.first_step)
        await _release(route.shared)
