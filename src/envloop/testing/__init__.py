"""A scripted model endpoint for tests and benchmarks: a real local HTTP server that speaks the
Chat Completions, Responses and Messages protocols, so clients are tested through the official SDKs
instead of mocks. `python -m envloop.testing` runs one in the foreground."""

from envloop.testing.script import Received, Reply, Responder, ScriptedToolCall, answers, echo
from envloop.testing.server import ScriptedServer

__all__ = ["Received", "Reply", "Responder", "ScriptedServer", "ScriptedToolCall", "answers", "echo"]
