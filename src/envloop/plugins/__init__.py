"""Plugins: agents, runners, JSONL scorers and environment providers from other distributions
(entry point groups `envloop.agents`, `envloop.runners`, `envloop.scorers`,
`envloop.environments`) or from `module:Name` references the operator allows."""

from envloop.plugins.catalog import Catalog, Found, Origin, ShapeError, instantiate
from envloop.plugins.errors import ComponentError
from envloop.plugins.references import ALLOW_VARIABLE

__all__ = ["ALLOW_VARIABLE", "Catalog", "ComponentError", "Found", "Origin", "ShapeError", "instantiate"]
