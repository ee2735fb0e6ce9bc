"""The base of every wire model."""

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """A model's validator and serializer are built when it is first used, not when its module is
    imported: a command reads one or two of these models, and building all of them at import
    would cost every `el` call and every `import envloop.client` a large part of its start-up."""

    model_config = ConfigDict(defer_build=True)
