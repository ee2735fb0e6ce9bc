"""Gemini CLI's stream-json read into steps (as Gemini CLI 0.61 writes it), without the gateway
(model steps from the stream itself) and behind it (tool steps only), and the run's end: success,
the turn limit, an API error. Plus the translation's edge cases the CLI tests do not reach."""

import json

from envloop.agents.gemini_events import GeminiEvents
from envloop.core.trajectory import ModelRequestSummary, ModelStep, SystemStep, ToolStep, TrajectoryRecorder
from envloop.models.gemini_translation import GeminiChunks, chat_request, gemini_response

SUMMARY = ModelRequestSummary(protocol="gemini", endpoint="gateway", model="team/sft", messages=1)
STATS = {"total_tokens": 60, "input_tokens": 50, "output_tokens": 10, "cached": 4, "tool_calls": 1}
RUN = [
    {"type": "init", "session_id": "s1", "model": "team/sft"},
    {"type": "message", "role": "user", "content": "Create done.txt"},
    {"type": "message", "role": "assistant", "content": "Solving ", "delta": True},
    {"type": "message", "role": "assistant", "content": "it.", "delta": True},
    {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "run_shell_command__call_1",
     "parameters": {"command": "false"}},
    {"type": "tool_result", "tool_id": "run_shell_command__call_1", "status": "success",
     "output": "Exit Code: 1"},
    {"type": "tool_use", "tool_name": "read_file", "tool_id": "read_file__call_2",
     "parameters": {"path": "x"}},
    {"type": "tool_result", "tool_id": "read_file__call_2", "status": "error",
     "error": {"type": "FILE_NOT_FOUND", "message": "no such file"}},
    {"type": "message", "role": "assistant", "content": "Done.", "delta": True},
]  # fmt: skip


def feed(lines: list[object], model_steps: bool) -> tuple[GeminiEvents, TrajectoryRecorder]:
    recorder = TrajectoryRecorder("trl_x", "envloop/shell@1", "gemini-cli")
    events = GeminiEvents(recorder, SUMMARY, model_steps)
    for line in [*lines, "not json", "[1]"]:
        events.feed(line if isinstance(line, str) else json.dumps(line))
    return events, recorder


def test_without_the_gateway_the_stream_gives_model_steps_tool_steps_and_the_totals() -> None:
    result = {"type": "result", "status": "success", "stats": STATS}
    events, recorder = feed([*RUN, result], model_steps=True)
    steps = recorder.trajectory.steps
    assert [type(s) for s in steps] == [SystemStep, ModelStep, ToolStep, ModelStep, ToolStep, ModelStep]
    first = steps[1]
    assert isinstance(first, ModelStep) and (first.text, first.stop) == ("Solving it.", "tool_calls")
    assert first.tool_calls[0].id == "call_1"
    shell, failed = steps[2], steps[4]
    assert isinstance(shell, ToolStep) and (shell.call_id, shell.command, shell.exit_code) == (
        "call_1",
        "false",
        1,
    )
    assert isinstance(failed, ToolStep) and (failed.tool, failed.error) == ("read_file", "no such file")
    assert events.finish() == ("done", None)
    usage = recorder.trajectory.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (50, 10, 4)


def test_behind_the_gateway_only_tool_steps_are_recorded() -> None:
    _, recorder = feed(RUN, model_steps=False)
    assert not any(isinstance(s, ModelStep) for s in recorder.trajectory.steps)
    assert [s.call_id for s in recorder.trajectory.steps if isinstance(s, ToolStep)] == ["call_1", "call_2"]
    assert recorder.trajectory.usage.input_tokens == 0


def test_the_turn_limit_is_max_steps_and_an_api_error_is_a_model_error() -> None:
    limit = {"type": "FatalTurnLimitedError", "message": "Reached max session turns for this session."}
    events, _ = feed(
        [{"type": "result", "status": "error", "error": limit, "stats": STATS}], model_steps=False
    )
    assert events.finish() == ("max_steps", None)
    api = {"type": "Error", "message": "[API Error: 404 unknown model]"}
    events, _ = feed([{"type": "result", "status": "error", "error": api}], model_steps=False)
    assert events.finish() == ("model_error", "Gemini CLI ended with error: [API Error: 404 unknown model]")
    assert feed(RUN, model_steps=False)[0].finish() == (None, None)


def test_responses_without_ids_answer_the_earliest_call_of_their_name_and_outputs_keep_their_shape() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "ls", "args": {}}},
                {"functionCall": {"name": "ls", "args": {"a": 1}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "ls", "response": {"output": "one"}}},
                {"functionResponse": {"name": "ls", "response": {"error": "two"}}},
                {"text": "and now?"},
            ]},
        ]
    }  # fmt: skip
    messages = chat_request(body, "m", stream=False)["messages"]
    calls = [c["id"] for c in messages[1]["tool_calls"]]
    assert len(set(calls)) == 2
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in messages[2:]] == [
        ("tool", calls[0], "one"),
        ("tool", calls[1], '{"error": "two"}'),
        ("user", None, "and now?"),
    ]


def test_a_cut_answer_and_unreadable_arguments_still_reach_the_agent_in_geminis_shape() -> None:
    whole = gemini_response({
        "choices": [{"finish_reason": "length", "message": {"content": None, "tool_calls": [
            {"id": "c", "function": {"name": "ls", "arguments": "{not json"}}
        ]}}],
    })  # fmt: skip
    [candidate] = whole["candidates"]
    assert candidate["finishReason"] == "MAX_TOKENS"
    assert candidate["content"]["parts"] == [
        {"functionCall": {"id": "c", "name": "ls", "args": {"arguments": "{not json"}}}
    ]
    chunks = GeminiChunks()
    assert chunks.feed({"choices": [{"delta": {"content": ""}}]}) == []
    last = chunks.end()
    assert (
        last["candidates"][0]["content"]["parts"] == [{"text": ""}]
        and last["usageMetadata"]["totalTokenCount"] == 0
    )
