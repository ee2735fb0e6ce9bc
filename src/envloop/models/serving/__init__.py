"""`el model serve`: local models under named aliases (`NAME/base`, `NAME/sft`, …) over the Chat
Completions and Messages protocols, for before/after evaluations that need no network."""

from envloop.models.serving.aliases import AliasSettings, ServedAlias, parse_models
from envloop.models.serving.app import create_model_app
from envloop.models.serving.engine import Engine, ServingError

__all__ = ["AliasSettings", "Engine", "ServedAlias", "ServingError", "create_model_app", "parse_models"]
