"""The built-in runners' and agents' params models, added to the OpenAPI document as named
schemas (`params.runner.envloop-shell-1`, `params.agent.envloop`, …): the same models that check
profiles and that `GET /v1/runners` returns as `params_schema`. Plugins' models are served by
`GET /v1/runners` only, so the document stays the same on every installation."""

import re
from typing import Any

from pydantic import BaseModel

from envloop.agents import AGENTS
from envloop.runners.registry import RUNNERS


def _named(models: dict[str, type[BaseModel]]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for name, model in models.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    return schemas


def with_param_schemas(document: dict[str, Any]) -> dict[str, Any]:
    models: dict[str, type[BaseModel]] = {}
    for ref, runner in RUNNERS.builtins().items():
        models[f"params.runner.{re.sub(r'[^A-Za-z0-9.-]+', '-', ref)}"] = runner.params_model
    for name, agent in AGENTS.builtins().items():
        models[f"params.agent.{name}"] = agent.params_model
    document.setdefault("components", {}).setdefault("schemas", {}).update(_named(models))
    return document
