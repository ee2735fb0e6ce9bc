"""The base of the models that surfaces read: built on first use, not at import."""

from pydantic import BaseModel, ConfigDict


class LazyModel(BaseModel):
    """A model whose validator and serializer are built when it is first used, not when its module
    is imported. A command or a client reads one or two of the wire and metrics models; building
    all of them at import would cost every `el` call and every `import envloop.client` a large part
    of its start-up. Behaviour is the same either way."""

    model_config = ConfigDict(defer_build=True)
