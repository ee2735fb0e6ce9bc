"""Plugins: agents, runners, JSONL scorers and environment providers from other distributions
(entry point groups `envloop.agents`, `envloop.runners`, `envloop.scorers`,
`envloop.environments`) or from `module:Name` references the operator allows.

A plugin declares its params with the names below (`class MyParams(ComponentParams): ...`) and
reads them with `read_params`; see docs/guides/profiles-and-plugins.md, "Writing a plugin"."""

from envloop.core.params import AllParams, ComponentParams, ParamReader, param, read_params, secret_param
from envloop.plugins.catalog import Catalog, Found, ShapeError, instantiate
from envloop.plugins.errors import ComponentError
from envloop.plugins.references import ALLOW_VARIABLE
from envloop.wire.runners import Origin

__all__ = [
    "ALLOW_VARIABLE",
    "AllParams",
    "Catalog",
    "ComponentError",
    "ComponentParams",
    "Found",
    "Origin",
    "ParamReader",
    "ShapeError",
    "instantiate",
    "param",
    "read_params",
    "secret_param",
]
