"""One error shape for every 4xx: `{"detail": "one line"}`, as the API's description promises.

FastAPI answers a request that does not fit a route's parameters or body with 422 and a list of
problems, and documents that 422 on every operation. Here such a request is bad input like any
other: 400 with the first problem as one line (`body.attempts: Input should be greater than or
equal to 1`), and the OpenAPI document lists 400, not 422, so clients and the document agree.
"""

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from envloop.operations.operation import one_line

_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    detail = one_line(errors[0]) if errors else "the request does not fit this operation"
    return JSONResponse({"detail": detail}, status_code=400)


def without_validation_responses(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with FastAPI's 422 answers removed (they are 400s, documented already)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            if isinstance(operation, dict):
                operation.get("responses", {}).pop("422", None)
    schemas = document.get("components", {}).get("schemas", {})
    for name in _FASTAPI_VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    return document
