"""The API's OpenAPI document, as checked in at the repository root (a test fails when they drift).

python -m envloop.api.openapi > openapi.json
"""

import json
import sys
from typing import Any

from envloop.api.app import create_app


def openapi_document() -> dict[str, Any]:
    return create_app().openapi()


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
