"""Bodies and error shapes that exist only at the HTTP boundary."""

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    detail: str = Field(description="one line saying what is wrong")


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad input; nothing was changed"},
    401: {"model": ErrorBody, "description": "No valid API key or share token"},
    403: {"model": ErrorBody, "description": "A share token asked for more than reading its job"},
    404: {"model": ErrorBody, "description": "Unknown here (or belonging to another project)"},
    409: {"model": ErrorBody, "description": "Contradicts what is stored"},
    413: {"model": ErrorBody, "description": "The request body is larger than its limit"},
}


class Health(BaseModel):
    status: str
    version: str
