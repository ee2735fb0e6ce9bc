"""The HTTP API under /v1: every operation of the service layer, authenticated per project."""

from envloop.api.app import create_app

__all__ = ["create_app"]
