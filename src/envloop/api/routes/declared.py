"""The routes of the declared operations (`envloop.declarations`), each built from its declaration.

A route's parameters are the request's fields: those named in the path, then, for a GET, the
others as query parameters with their limits and descriptions; for a POST, the others as the JSON
body (the one field's model, or a model of the fields named by the declaration's `body`). Its
caller check follows the declaration's scope, and it answers what the service function returns.
"""

import inspect
from collections.abc import Callable
from typing import Annotated, Any, cast

from fastapi import APIRouter, Body, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo

from envloop.api.auth import job_reader, project, trial_reader
from envloop.api.schemas import ERRORS
from envloop.declarations import Declarations
from envloop.operation import Operation
from envloop.services.context import Context

SCOPES: dict[str, Callable[..., Context]] = {"project": project, "job": job_reader, "trial": trial_reader}

_CONTEXT = "ctx"
_RESPONSE = "response"
_BODY = "body"


def declared_operations() -> list[Operation[..., Any, Any]]:
    """Every declared operation, in declaration order."""
    return [value for value in vars(Declarations).values() if isinstance(value, Operation)]


def _parameter(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


def _query(name: str, info: FieldInfo) -> inspect.Parameter:
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        return _parameter(name, Annotated[info.annotation, Query()])
    query = Query(alias=info.alias, description=info.description)
    annotation = cast(Any, Annotated)[(info.annotation, *info.metadata, query)]
    default = inspect.Parameter.empty if info.is_required() else info.default
    return _parameter(name, annotation, default)


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
    if operation.method == "GET":
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
        answer = operation.serve(ctx, operation.request_type(**values))
        if response is not None and operation.existing is not None and operation.existing(answer):
            response.status_code = 200
        return answer

    endpoint.__name__ = endpoint.__qualname__ = operation.name
    endpoint.__doc__ = operation.doc
    endpoint.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return endpoint


def build_router() -> APIRouter:
    router = APIRouter(responses=ERRORS)
    for operation in declared_operations():
        router.add_api_route(
            operation.path,
            _endpoint(operation),
            methods=[operation.method],
            name=operation.name,
            response_model=operation.response,
            status_code=operation.status_code,
            tags=[operation.tag],
            description=inspect.cleandoc(operation.doc or ""),
            responses=operation.responses,
        )
    return router


router = build_router()
