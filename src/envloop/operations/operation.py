"""One operation of envloop, declared once (the why: docs/design/operations.md).

An `Operation` names everything about an operation that used to be written in five places: its
typed request (a pydantic dataclass in `envloop.wire`, whose fields are the operation's parameters
with their defaults and limits), its answer (both named through `envloop.wire.deferred`, so they
are imported when the operation is first used), its HTTP method and path, who may call it, and the
service function that does it (`services.things.get_thing`, through
`envloop.operations.services`: the function itself for the type checker and an editor, imported
on first use at run time so the HTTP client never loads the store). From the declaration:

- `envloop.api` builds the HTTP route (path parameters, query parameters, a JSON body or a
  multipart form, the caller check, the status code, how it answers), so the OpenAPI document
  follows the declaration;
- `envloop.Client` sends the request and reads the answer;
- `envloop.LocalClient` calls the service function in this process;
- both clients get a method of the operation's name whose parameters are the request's fields,
  checked by mypy (the declaration is a descriptor typed by the request class's constructor).

Adding an operation is one declaration in `envloop.operations.declared` and one service function,
whatever its kind (below, `Thing` is a request with a `thing_id` field, `ThingView` a model;
`Events`, `Download` and `Upload` are in `envloop.operations.kinds`):

    # A JSON answer: the service function returns it.
    get_thing = Operation("GET", "/v1/things/{thing_id}", Thing, ThingView,
                          service=services.things.get_thing, tag="things")

    # Events as they happen: the service function returns a `Feed` (polled, in process, every
    # FEED_POLL_SEC; over HTTP, server-sent events read back into the event models).
    watch_thing = Events("/v1/things/{thing_id}/events", Thing, ThingEvent,
                         service=services.things.watch_thing, tag="things",
                         stream_doc="A stream of `thing` events, then `end`")

    # Bytes, never held whole: the service function returns a file's `Path`, bytes, or chunks.
    read_thing = Download("/v1/things/{thing_id}/bytes", Thing,
                          service=services.things.thing_file, tag="things")

    # A local file or folder sent with form fields: the request's `file` field is a `Path`, packed
    # by the HTTP client and unpacked by the route; the service function reads the path.
    push_thing = Upload("/v1/things", PushThing, ThingView, file="path", part="archive",
                        service=services.things.push_thing, tag="things")

A field that a URL query cannot carry as it is (a dict) says how it travels with a `QueryForm` in
its annotation (`ListJobs.tags` goes as `tag=key=value`). A convenience made of declared operations
(`copy_artifacts`, `trial_steps`) is one method of `envloop.operations.Operations`, shared by both
clients.
"""

import dataclasses
import inspect
import re
from collections.abc import Callable
from functools import cached_property
from typing import (
    Any,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    Self,
    TypeVar,
    cast,
    overload,
)
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from envloop.errors import UserError
from envloop.operations.services import ServiceFunction
from envloop.wire.deferred import resolved
from envloop.wire.request import QueryForm

P = ParamSpec("P")
Req = TypeVar("Req")
Resp = TypeVar("Resp")

Scope = Literal["project", "job", "trial"]
"""Who may call: any API key of the project; or also a share token of the job (`job_id` in the
path) or of the trial's job (`trial_id` in the path)."""

_PATH_PARAM = re.compile(r"{(\w+)(:path)?}")


def one_line(error: dict[str, Any]) -> str:
    """`where: what` for the first problem of a validation error."""
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    text = f"{where}: {message}" if where else message
    return " ".join(text.split())[:500]


class Caller(Protocol):
    """What a declaration's method calls: a client (`envloop.operations.Operations`)."""

    def call(self, operation: "Operation[..., Req, Resp]", request: Req) -> Resp: ...


class Operation(Generic[P, Req, Resp]):
    """An operation's declaration; as a class attribute of `Declarations`, a method of every client."""

    name: str

    def __init__(
        self,
        method: Literal["GET", "POST"],
        path: str,
        request: Callable[P, Req],
        response: type[Resp],
        *,
        service: Callable[..., Any],
        tag: str,
        scope: Scope = "project",
        doc: str | None = None,
        status_code: int = 200,
        existing: Callable[[Resp], bool] | None = None,
        existing_doc: str = "",
        body: str | None = None,
        queued_status: Callable[[Resp], str] | None = None,
        routed: bool = True,
        route_name: str | None = None,
    ) -> None:
        """`service` is the service function (`envloop.operations.services`), called as
        `function(ctx, **fields of the request)`.
        `existing` says when an answer is something already stored (200 instead of `status_code`),
        `existing_doc` how the OpenAPI document describes that answer.
        `body` names the JSON body of a POST whose fields are not one model (its OpenAPI schema).
        `queued_status` gives the status of what the operation queued, so an in-process client can
        start a worker when trials wait.
        `routed=False`: the route of another declaration with the same method and path answers it,
        with an answer that holds this one's fields (`job_progress` reads `get_job`'s), so it adds
        no route of its own. `route_name` names the route when it is older than the method (the
        OpenAPI document's operation ID)."""
        self.method = method
        self.path = path
        self._request = request
        self._response = response
        self.service = service
        self.tag = tag
        self.scope = scope
        self.doc = doc
        self.status_code = status_code
        self.existing = existing
        self.existing_doc = existing_doc
        self.body = body
        self.queued_status = queued_status
        self.routed = routed
        self.route_name = route_name

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    # -- the models, imported on first use (`envloop.wire.deferred`) --------------------------------

    @cached_property
    def request(self) -> Callable[P, Req]:
        """The request's class, called with a method's arguments."""
        return cast(Callable[P, Req], resolved(self._request))

    @cached_property
    def request_type(self) -> type[Any]:
        return cast(type[Any], self.request)

    @cached_property
    def response(self) -> type[Resp]:
        """The answer's type: a model, or a list of models."""
        return cast(type[Resp], resolved(self._response))

    @property
    def returns(self) -> Any:
        """What the method returns (its annotation)."""
        return self.response

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, obj: Caller, owner: type[Any]) -> Callable[P, Resp]: ...
    def __get__(self, obj: Caller | None, owner: type[Any]) -> "Self | Callable[P, Resp]":
        if obj is None:
            return self
        client = obj

        def bound(*args: P.args, **kwargs: P.kwargs) -> Resp:
            return client.call(self, self.make(*args, **kwargs))

        bound.__name__ = bound.__qualname__ = self.name
        bound.__doc__ = self.doc
        bound.__signature__ = self.signature  # type: ignore[attr-defined]
        return bound

    def make(self, *args: P.args, **kwargs: P.kwargs) -> Req:
        """The request from a method's arguments; a value out of bounds is a `UserError`."""
        names = list(self.fields)
        if len(args) > len(names):
            raise TypeError(
                f"{self.name}() takes {len(names)} positional arguments but {len(args)} were given"
            )
        try:
            construct = cast(Callable[..., Req], self.request)
            return construct(**dict(zip(names, args, strict=False)), **kwargs)
        except ValidationError as exc:
            raise UserError(one_line(dict(exc.errors()[0]))) from None

    # -- the parts of the request ------------------------------------------------------------------

    @cached_property
    def fields(self) -> dict[str, FieldInfo]:
        """The request's fields in order, with their types, defaults and limits."""
        declared: dict[str, FieldInfo] = self.request_type.__pydantic_fields__
        return {f.name: declared[f.name] for f in dataclasses.fields(self.request_type)}

    @cached_property
    def signature(self) -> inspect.Signature:
        """The method's parameters: the request's fields, in order, with their defaults."""
        return inspect.Signature(
            [
                inspect.Parameter(
                    name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=(
                        inspect.Parameter.empty
                        if info.is_required()
                        else info.get_default(call_default_factory=True)
                    ),
                    annotation=info.annotation,
                )
                for name, info in self.fields.items()
            ],
            return_annotation=self.returns,
        )

    @cached_property
    def path_params(self) -> list[str]:
        return [m.group(1) for m in _PATH_PARAM.finditer(self.path)]

    @cached_property
    def other_params(self) -> list[str]:
        """The fields that are not in the path: the query of a GET, the body of a POST."""
        return [name for name in self.fields if name not in self.path_params]

    @cached_property
    def whole_body(self) -> str | None:
        """The one field whose model is a POST's whole body (`submit_job`'s JobRequest), if any."""
        if self.method != "POST" or self.body is not None or len(self.other_params) != 1:
            return None
        name = self.other_params[0]
        annotation = self.fields[name].annotation
        return name if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None

    @property
    def responses(self) -> dict[int | str, dict[str, Any]]:
        """The answers the OpenAPI document lists beside the usual one and the errors."""
        if self.existing is None:
            return {}
        return {200: {"model": self.response, "description": self.existing_doc}}

    def arguments(self, request: Req) -> dict[str, Any]:
        return {name: getattr(request, name) for name in self.fields}

    def url(self, request: Req) -> str:
        def fill(match: re.Match[str]) -> str:
            value = str(getattr(request, match.group(1)))
            return quote(value, safe="@/") if match.group(2) else quote(value, safe="")

        return _PATH_PARAM.sub(fill, self.path)

    def query(self, request: Req) -> dict[str, Any]:
        """A GET's query parameters: each field that is set (in its query form, if it has one), a
        model's fields that differ from their defaults."""
        params: dict[str, Any] = {}
        for name in self.other_params:
            value = getattr(request, name)
            form = query_form(self.fields[name])
            if isinstance(value, BaseModel):
                params.update(value.model_dump(mode="json", exclude_defaults=True))
            elif value is not None and form is not None:
                params[form.name] = form.encode(value)
            elif value is not None:
                params[self.fields[name].alias or name] = to_jsonable_python(value)
        return params

    def json_body(self, request: Req) -> Any:
        if self.whole_body is not None:
            return to_jsonable_python(getattr(request, self.whole_body))
        return {name: to_jsonable_python(getattr(request, name)) for name in self.other_params}

    # -- doing it ----------------------------------------------------------------------------------

    def implementation(self) -> Callable[..., Any]:
        """The service function itself, imported now if it was named before its module was."""
        return self.service.function if isinstance(self.service, ServiceFunction) else self.service

    def answer(self, ctx: Any, request: Req) -> Any:
        """What the service function returns for the request: the answer itself, or what a route
        sends it from (an events operation's feed, a download's file)."""
        return self.implementation()(ctx, **self.arguments(request))

    def serve(self, ctx: Any, request: Req) -> Resp:
        """Do the operation on a context (`envloop.services.context.Context`) in this process."""
        return cast(Resp, self.answer(ctx, request))


def query_form(info: FieldInfo) -> QueryForm | None:
    """How a field travels as query parameters, when not as itself (`envloop.wire.request.QueryForm`)."""
    return next((item for item in info.metadata if isinstance(item, QueryForm)), None)
