"""The routes of the declared operations (`envloop.operations.declared`), each built from its declaration.

A route's parameters are the request's fields: those named in the path, then, for a GET, the
others as query parameters with their limits and descriptions (or in their query form); for a POST,
the others as the JSON body (the one field's model, or a model of the fields named by the
declaration's `body`), or for an upload as a multipart form (the file, then the form fields). Its
caller check follows the declaration's scope, and it answers what the service function returns:
a model as JSON, an events operation's feed as server-sent events, a download's file as its bytes.
"""

import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, cast

from fastapi import APIRouter, Body, Depends, File, Form, Query, Response, UploadFile
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo

from envloop.api.auth import job_reader, project, trial_reader
from envloop.api.events import event_stream
from envloop.api.schemas import ERRORS
from envloop.api.uploads import unpacked
from envloop.operations.declared import declared_operations
from envloop.operations.kinds import Download, Events, Upload
from envloop.operations.operation import Operation, query_form
from envloop.services.context import Context

SCOPES: dict[str, Callable[..., Context]] = {"project": project, "job": job_reader, "trial": trial_reader}

_CONTEXT = "ctx"
_RESPONSE = "response"
_BODY = "body"


def _parameter(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


def _query(name: str, info: FieldInfo) -> inspect.Parameter:
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        return _parameter(name, Annotated[info.annotation, Query()])
    default = inspect.Parameter.empty if info.is_required() else info.default
    form = query_form(info)
    if form is not None:
        query = Query(alias=form.name, description=info.description)
        return _parameter(name, Annotated[form.annotation, query], default)
    query = Query(alias=info.alias, description=info.description)
    annotation = cast(Any, Annotated)[(info.annotation, *info.metadata, query)]
    return _parameter(name, annotation, default)


def _form(name: str, info: FieldInfo) -> inspect.Parameter:
    annotation = cast(Any, Annotated)[(info.annotation, *info.metadata, Form(description=info.description))]
    default = inspect.Parameter.empty if info.is_required() else info.default
    return _parameter(name, annotation, default)


def _upload_parameters(operation: Upload[..., Any, Any]) -> list[inspect.Parameter]:
    """The multipart form: the form fields that must be given, the file as its part, then the
    optional form fields (as the document has always listed a dataset upload's)."""
    described = File(description=operation.fields[operation.file].description)
    forms = [_form(name, operation.fields[name]) for name in operation.form_params]
    return [
        *(p for p in forms if p.default is inspect.Parameter.empty),
        _parameter(operation.part, Annotated[UploadFile, described]),
        *(p for p in forms if p.default is not inspect.Parameter.empty),
    ]


def _body_model(operation: Operation[..., Any, Any]) -> type[BaseModel]:
    """The JSON body of a POST whose fields are not one model, named as the declaration says."""
    fields: dict[str, Any] = {
        name: (operation.fields[name].annotation, operation.fields[name]) for name in operation.other_params
    }
    assert operation.body is not None, f"{operation.name}: a POST with fields needs a body name"
    return create_model(operation.body, __config__=ConfigDict(extra="forbid"), **fields)


def _endpoint(operation: Operation[..., Any, Any]) -> Callable[..., Any]:
    parameters = [_parameter(name, str) for name in operation.path_params]
    parameters.append(_parameter(_CONTEXT, Annotated[Context, Depends(SCOPES[operation.scope])]))
    body: type[BaseModel] | None = None
    if isinstance(operation, Upload):
        parameters += _upload_parameters(operation)
    elif operation.method == "GET":
        parameters += [_query(name, operation.fields[name]) for name in operation.other_params]
    elif operation.whole_body is not None:
        parameters.append(_parameter(operation.whole_body, operation.fields[operation.whole_body].annotation))
    elif operation.other_params:
        body = _body_model(operation)
        parameters.append(_parameter(_BODY, Annotated[body, Body()]))
    if operation.existing is not None:
        parameters.append(_parameter(_RESPONSE, Response))

    def endpoint(**values: Any) -> Any:
        ctx = values.pop(_CONTEXT)
        response: Response | None = values.pop(_RESPONSE, None)
        if body is not None:
            given = values.pop(_BODY)
            values.update({name: getattr(given, name) for name in operation.other_params})
        if isinstance(operation, Upload):
            with unpacked(values.pop(operation.part)) as path:
                answer = operation.answer(ctx, operation.request_type(**values, **{operation.file: path}))
        else:
            answer = operation.answer(ctx, operation.request_type(**values))
        if isinstance(operation, Events):
            return event_stream(answer)
        if isinstance(operation, Download):
            return _bytes(operation, answer)
        if response is not None and operation.existing is not None and operation.existing(answer):
            response.status_code = 200
        return answer

    endpoint.__name__ = endpoint.__qualname__ = operation.route_name or operation.name
    endpoint.__doc__ = operation.doc
    endpoint.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return endpoint


def _bytes(operation: Download[..., Any], body: Path | bytes | Iterable[str | bytes]) -> Response:
    """A download's answer, sent as it is read: a file (with Range requests), bytes, or chunks."""
    if isinstance(body, Path):
        return FileResponse(body, media_type=operation.media_type)
    if isinstance(body, bytes):
        return Response(body, media_type=operation.media_type)
    return StreamingResponse(body, media_type=operation.media_type)


def _answer(operation: Operation[..., Any, Any]) -> dict[str, Any]:
    """How the route answers, as `add_api_route` takes it: a model, events or a file's bytes."""
    if isinstance(operation, Events):
        content = {"text/event-stream": {"schema": {"type": "string"}}}
        return {
            "response_model": None,
            "response_class": StreamingResponse,
            "responses": {200: {"description": operation.stream_doc, "content": content}},
        }
    if isinstance(operation, Download) and operation.schema is not None:
        return {
            "response_model": None,
            "responses": {200: {"description": operation.answer_doc, "model": operation.schema}},
        }
    if isinstance(operation, Download):
        content = {operation.media_type: {}}
        return {
            "response_model": None,
            "response_class": FileResponse,
            "responses": {200: {"description": operation.answer_doc, "content": content}},
        }
    return {"response_model": operation.response, "responses": operation.responses}


def build_router(operations: list[Operation[..., Any, Any]]) -> APIRouter:
    """The routes of `operations` (each one's own: an unrouted one is answered by another's)."""
    router = APIRouter(responses=ERRORS)
    for operation in operations:
        if not operation.routed:
            continue
        router.add_api_route(
            operation.path,
            _endpoint(operation),
            methods=[operation.method],
            name=operation.route_name or operation.name,
            status_code=operation.status_code,
            tags=[operation.tag],
            description=inspect.cleandoc(operation.doc or ""),
            **_answer(operation),
        )
    return router


router = build_router(declared_operations())
