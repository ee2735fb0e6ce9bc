"""`terminus-2` in the local sandbox: a real tmux session driven with keystrokes by the scripted
endpoint, through the runner, with the verifier's verdict and the trajectory the trial keeps."""

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from envloop.agents.terminus_tmux import bundle_tmux, supports_foreground
from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, ToolStep, Trajectory, UserStep, VerifierStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments.local import LocalEnvironmentProvider
from envloop.environments.provider import EnvironmentProvider
from envloop.models import close_clients
from envloop.runners import ShellRunner
from envloop.runners.params import check_params
from envloop.testing import Received, Reply, ScriptedServer
from envloop.trajectories import read_trajectory
from tests.agent_cli_support import SECRET as SECRET_OF_CLI_TESTS
from tests.agent_cli_support import run_example
from tests.conftest import El, make_task

SECRET = "sk-terminus-test-4d2c"


def turn(*keys: str | tuple[str, float], complete: bool = False, **extra: Any) -> Reply:
    """An answer typing each entry (a string waits 0.2 s; a pair names its own wait)."""
    commands = [
        {"keystrokes": k, "duration": 0.2} if isinstance(k, str) else {"keystrokes": k[0], "duration": k[1]}
        for k in keys
    ]
    document = {"analysis": "looked", "plan": "type", "commands": commands, "task_complete": complete}
    return Reply(text=json.dumps(document), **extra)


DONE = turn(complete=True)


def params(server: ScriptedServer, protocol: str = "openai", **extra: str) -> dict[str, str]:
    return {
        "AGENT_NAME": "terminus-2",
        "MODEL_PROTOCOL": protocol,
        "MODEL_BASE_URL": server.openai_url if protocol == "openai" else server.anthropic_url,
        "MODEL_NAME": "team-model/sft",
        "MODEL_API_KEY": SECRET,
        "MAX_RETRIES": "0",
        **extra,
    }


def run(
    tmp_path: Path,
    profile: dict[str, str],
    task: Path | None = None,
    provider: EnvironmentProvider | None = None,
    secrets: tuple[str, ...] = (SECRET,),
    **fields: Any,
) -> TrialOutcome:
    task = task or make_task(tmp_path / "tasks", "hello", solve="touch done")
    spec = TrialSpec(
        job_id="job_terminus",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/terminus@1",
        runner="envloop/shell@1",
        params=profile,
        secret_values=secrets,
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **fields,
    )

    async def go() -> TrialOutcome:
        try:
            return await ShellRunner(provider).run(spec)
        finally:
            await close_clients()

    return asyncio.run(go())


def trajectory(tmp_path: Path) -> Trajectory:
    return read_trajectory(tmp_path / "artifacts" / "trajectory.json")


def last_prompt(received: Received) -> str:
    content = received.messages[-1]["content"]
    return content if isinstance(content, str) else "".join(block["text"] for block in content)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_model_types_into_the_terminal_and_confirms_completion(tmp_path: Path, protocol: str) -> None:
    script = [turn("cd /tmp\n", "cd - >/dev/null; echo hi > done; cat done\n"), DONE, DONE]
    with ScriptedServer(script, api_key=SECRET) as server:
        outcome = run(tmp_path, params(server, protocol))
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    assert outcome.usage["calls"] == 3 and outcome.usage["input_tokens"] > 0
    steps = trajectory(tmp_path).steps
    assert [s.kind for s in steps] == ["user", "model", "tool", "tool", "model", "model", "verifier"]
    first, _, moved, typed, _, _, verifier = steps
    assert (
        isinstance(first, UserStep) and "Do the hello thing." in first.text and '"keystrokes"' in first.text
    )
    assert isinstance(moved, ToolStep) and isinstance(typed, ToolStep)
    assert (typed.tool, typed.call_id, typed.arguments["duration"]) == ("keystrokes", "call_1_2", 0.2)
    # The shell kept the directory between entries, and each step shows what appeared after it.
    assert "\nhi\n" in typed.stdout and [c.path for c in typed.changes] == ["done"]
    assert isinstance(verifier, VerifierStep) and verifier.reward == 1.0
    # The model saw what appeared, then was asked to confirm, and its second yes ended the loop.
    shown, confirm = last_prompt(server.received[1]), last_prompt(server.received[2])
    assert shown.startswith("New Terminal Output:\n") and "cat done\nhi\n" in shown
    # One increment for the turn: each prompt line shows once, with what was typed after it.
    assert shown.count("$ cd ") == 2 and "$\n" not in shown
    assert "really done" in confirm and "task_complete" in confirm
    assert (tmp_path / "artifacts" / "agent" / "terminal.txt").read_text().count("cat done\nhi\n") == 1


def test_a_completion_not_confirmed_lets_the_model_go_on(tmp_path: Path) -> None:
    script = [turn(complete=True), turn("touch done\n"), DONE, DONE]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.reward, outcome.stop_reason, len(server.received)) == (1.0, "done", 4)
    assert "really done" in last_prompt(server.received[1])
    assert "really done" not in last_prompt(server.received[2])


def test_an_answer_that_cannot_be_read_is_answered_with_why_and_the_loop_goes_on(tmp_path: Path) -> None:
    script = [
        Reply(text="I will create the file."),
        Reply(text='{"analysis": "a", "plan": "b", "commands": [{"keystrokes": 5}]}'),
        Reply(text='Sure:\n```json\n{"analysis": "a", "commands": [{"keystrokes": "touch done\\n"}]}\n```'),
        DONE,
        DONE,
    ]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    prompts = [last_prompt(r) for r in server.received[1:4]]
    assert prompts[0].startswith(
        "Your last answer could not be used, and nothing was typed: the answer holds no JSON"
    )
    assert 'command 1 needs "keystrokes" as a string' in prompts[1]
    assert prompts[2].startswith("Note on your last answer: there was text outside the JSON object")
    assert "command 1 has no duration; waited 1 s" in prompts[2]


def test_the_jobs_max_steps_bounds_the_model_calls(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: turn("echo step >> log.txt\n")) as server:
        outcome = run(tmp_path, params(server, MAX_STEPS="5"), max_steps=2)
    assert (outcome.status, outcome.stop_reason, len(server.received)) == ("completed", "max_steps", 2)
    kinds = [s.kind for s in trajectory(tmp_path).steps]
    assert kinds.count("model") == 2 and kinds.count("tool") == 2


def test_the_agent_timeout_keeps_every_model_call_made_so_far(tmp_path: Path) -> None:
    script = [turn("touch started\n"), turn(("sleep 60\n", 30.0))]
    with ScriptedServer(script, default=lambda _: turn(("", 30.0))) as server:
        outcome = run(tmp_path, params(server), agent_timeout_sec=3)
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert outcome.stop_reason == "timeout" and outcome.usage["calls"] == 2 == len(server.received)
    kept = trajectory(tmp_path)
    assert kept.stop_reason == "timeout" and kept.usage.input_tokens > 0
    models = [s for s in kept.steps if isinstance(s, ModelStep)]
    assert len(models) == 2 and all(m.usage.output_tokens > 0 for m in models)
    interrupted = [s for s in kept.steps if isinstance(s, ToolStep)][-1]
    assert interrupted.command == "sleep 60\n" and interrupted.error is not None
    assert "interrupted" in interrupted.error
    assert "touch started" in (tmp_path / "artifacts" / "agent" / "terminal.txt").read_text()


def test_its_model_calls_go_through_the_workers_gateway_once_each_even_the_one_cut_by_the_timeout(
    tmp_path: Path,
) -> None:
    """The first answer solves the task; the second call is still waiting on the endpoint when the
    agent's time is up. The endpoint got the real key from the gateway, never from the agent, and
    each call is one model step: the answered one with its tokens, the cut one as it stood."""
    script = [turn("touch done\n")]
    with ScriptedServer(script, default=lambda _: Reply(text="late", delay_sec=60), api_key=SECRET) as server:
        outcome = run(tmp_path, params(server), agent_timeout_sec=4)
        received = list(server.received)
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert len(received) == 2
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in received)
    kept = trajectory(tmp_path)
    answered, cut = [s for s in kept.steps if isinstance(s, ModelStep)]
    # Recorded by the gateway, which names the endpoint it forwarded to (the agent only knew its own).
    assert answered.request.endpoint == f"{server.openai_url}/chat/completions"
    assert answered.usage.output_tokens > 0
    assert cut.text == "" and cut.finish_reason in ("agent_disconnected", "session_closed")
    assert outcome.usage["calls"] == 2 and outcome.usage["output_tokens"] == answered.usage.output_tokens
    assert outcome.reward == 1.0 and kept.steps[-1].kind == "verifier"  # the work done was judged


def test_a_key_name_presses_the_key(tmp_path: Path) -> None:
    script = [turn("sleep 100\n", "C-c", "echo $((6 * 7)) > done\n"), DONE, DONE]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server, MAX_WAIT_SEC="5"))
    assert outcome.reward == 1.0 and outcome.stop_reason == "done"
    typed = [s for s in trajectory(tmp_path).steps if isinstance(s, ToolStep)]
    assert "^C" in typed[1].stdout and "42" not in typed[1].stdout


def test_long_keystrokes_and_leading_dashes_are_typed_as_written(tmp_path: Path) -> None:
    text = "é" * 5000
    script = [turn("cat > typed <<'EOF'\n", "-R -t x\n", f"{text}\n", "EOF\n", "cp typed done\n"), DONE, DONE]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert outcome.reward == 1.0 and outcome.stop_reason == "done"
    [*_, copied] = [s for s in trajectory(tmp_path).steps if isinstance(s, ToolStep)]
    [made] = copied.changes
    assert (made.path, made.size) == ("done", len(f"-R -t x\n{text}\n".encode()))


def test_long_output_is_clipped_for_the_model_and_kept_whole_in_the_trajectory(tmp_path: Path) -> None:
    script = [turn(("seq 1 30000\n", 1.0)), DONE, DONE]
    with ScriptedServer(script) as server:
        run(tmp_path, params(server, OUTPUT_LIMIT="2000"))
    shown = last_prompt(server.received[1])
    assert len(shown) < 2200 and "characters left out" in shown
    assert shown.startswith("New Terminal Output:\n") and "\n29999\n30000\n" in shown
    [typed] = [s for s in trajectory(tmp_path).steps if isinstance(s, ToolStep)]
    assert "".join(f"\n{n}" for n in range(1, 30001)) in typed.stdout


def test_a_wait_longer_than_max_wait_sec_is_cut_and_said(tmp_path: Path) -> None:
    script = [turn(("touch done\n", 100.0)), DONE, DONE]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server, MAX_WAIT_SEC="0.5"))
    assert outcome.reward == 1.0
    assert "command 1 asked to wait 100 s; waited 0.5 s" in last_prompt(server.received[1])


def test_a_shell_that_exits_ends_the_loop(tmp_path: Path) -> None:
    with ScriptedServer([turn("touch done; exit\n")], default=lambda _: DONE) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.status, outcome.stop_reason, outcome.reward) == ("completed", "done", 1.0)
    assert len(server.received) == 1


def test_a_model_that_fails_for_good_fails_the_trial_as_model_error(tmp_path: Path) -> None:
    script = [turn("touch done\n"), Reply(status=401, error="bad key")]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert outcome.error is not None and outcome.error.type == "model_error"
    assert outcome.stop_reason == "model_error" and outcome.reward == 1.0


def test_near_the_context_window_the_conversation_restarts_from_a_summary(tmp_path: Path) -> None:
    script = [
        turn("echo one > notes\n", input_tokens=500),
        turn("echo two >> notes\n", input_tokens=900),
        Reply(text="Wrote notes with one and two; the file done remains to be made."),
        turn("touch done\n"),
        DONE,
        DONE,
    ]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server, CONTEXT_TOKENS="1200"))
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    summary_request, resumed = server.received[2], server.received[3]
    assert "Write a summary" in last_prompt(summary_request) and len(summary_request.messages) == 5
    assert len(resumed.messages) == 1
    restart = last_prompt(resumed)
    assert "Do the hello thing." in restart and "the file done remains to be made" in restart
    users = [s for s in trajectory(tmp_path).steps if isinstance(s, UserStep)]
    assert len(users) == 2 and "summary you wrote" in users[1].text


def test_a_request_refused_as_too_long_is_summarised_and_sent_again(tmp_path: Path) -> None:
    script = [
        turn("echo one > notes\n"),
        Reply(status=400, error="This model's maximum context length is 4096 tokens"),
        Reply(status=400, error="This model's maximum context length is 4096 tokens"),
        Reply(text="Wrote notes; done is left."),
        turn("touch done\n"),
        DONE,
        DONE,
    ]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.status, outcome.reward, outcome.stop_reason) == ("completed", 1.0, "done"), outcome.error
    # The summary's own request was too long once: it was sent again with fewer turns.
    assert len(server.received[2].messages) > len(server.received[3].messages)
    assert "Wrote notes; done is left." in last_prompt(server.received[4])
    failed = [s for s in trajectory(tmp_path).steps if isinstance(s, ModelStep) and s.error]
    assert len(failed) == 2


def test_secrets_are_masked_for_the_model_and_in_everything_kept(tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "secretive", toml='[environment.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n')
    with ScriptedServer([turn('echo "key=$JUDGE_KEY"\n'), DONE, DONE]) as server:
        profile = params(server, JUDGE_KEY="judge-secret-77aa")
        outcome = run(tmp_path, profile, task, secrets=(SECRET, "judge-secret-77aa"))
    assert outcome.stop_reason == "done", outcome.error
    shown = last_prompt(server.received[1])
    assert "key=***" in shown and "judge-secret-77aa" not in shown
    assert all("judge-secret-77aa" not in json.dumps(r.body) for r in server.received)
    kept = [path for path in (tmp_path / "artifacts").rglob("*") if path.is_file()]
    assert kept and not [path for path in kept if b"judge-secret-77aa" in path.read_bytes()]
    assert "key=***" in (tmp_path / "artifacts" / "agent" / "terminal.txt").read_text()


def test_bad_params_are_refused_before_anything_runs() -> None:
    problems = check_params(
        ShellRunner(),
        {
            "AGENT_NAME": "terminus-2",
            "MODEL_PROTOCOL": "openai",
            "MODEL_BASE_URL": "http://x/v1",
            "MODEL_NAME": "m",
            "MAX_WAIT_SEC": "0",
            "PANE_WIDTH": "5",
        },
    )
    assert problems == [
        "MAX_WAIT_SEC must be a number > 0, not '0'",
        "PANE_WIDTH must be a whole number from 20 to 1000, not '5'",
    ]


@pytest.mark.parametrize(
    ("line", "fit"),
    [
        ("tmux 3.3a", True),
        ("tmux 3.2", True),
        ("tmux next-3.5", True),
        ("tmux 3.1c", False),
        ("tmux 2.9", False),
    ],
)
def test_only_a_tmux_with_a_foreground_server_is_used_as_the_environments_own(line: str, fit: bool) -> None:
    assert supports_foreground(line) is fit


@pytest.mark.slow
def test_the_example_profile_solves_the_example_task_from_the_cli(cli_el: El, tmp_path: Path) -> None:
    solve = turn("printf 'Hello, world!\\n' > hello.txt\n")
    with ScriptedServer([solve, DONE, DONE], api_key=SECRET_OF_CLI_TESTS) as server:
        run_ = run_example(cli_el, tmp_path, "terminus-2", server, MAX_WAIT_SEC="5")
    assert (run_.trial["status"], run_.trial["reward"]) == ("completed", 1.0), run_.trial["error_message"]
    assert [s["kind"] for s in run_.steps] == ["user", "model", "tool", "model", "model", "verifier"]
    assert all(r.headers["authorization"] == f"Bearer {SECRET_OF_CLI_TESTS}" for r in server.received)
    [typed] = run_.tool("keystrokes")
    assert [c["path"] for c in typed["changes"]] == ["hello.txt"]
    assert all(s["usage"]["input_tokens"] > 0 for s in run_.of_kind("model"))


def test_the_workers_tmux_is_bundled_once_with_its_own_c_library_and_loader(tmp_path: Path) -> None:
    made = bundle_tmux(tmp_path / "cache")
    assert made.key.startswith("tmux-") and made.install_sec > 0
    libraries = sorted(path.name for path in (made.path / "lib").iterdir())
    assert "ld.so" in libraries and any(name.startswith("libc.so") for name in libraries)
    # It runs from its own directory with nothing of the worker's environment.
    ran = subprocess.run(
        [
            str(made.path / "lib" / "ld.so"),
            "--library-path",
            str(made.path / "lib"),
            str(made.path / "bin" / "tmux"),
            "-V",
        ],
        capture_output=True,
        text=True,
        env={},
        check=False,
    )
    assert ran.returncode == 0 and supports_foreground(ran.stdout), ran.stderr
    again = bundle_tmux(tmp_path / "cache")
    assert (again.path, again.install_sec) == (made.path, 0.0)


def test_in_a_plain_process_group_a_tmp_too_deep_for_a_socket_gives_way_to_the_systems(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60)
    assert len(f"{deep}/instances/{new_id('trl')}.r1/tmp/terminus-2.tmux") > 108
    before = set(Path("/tmp").glob("envloop-terminus-*"))
    with ScriptedServer([turn("touch done\n"), DONE, DONE]) as server:
        outcome = run(deep, params(server), provider=LocalEnvironmentProvider("plain"))
    assert (outcome.status, outcome.reward, outcome.stop_reason) == ("completed", 1.0, "done"), outcome.error
    # Its socket went with it. Another test running beside this one may have made its own since
    # (and may take its own away): one made meanwhile must go once that test's trial ends.
    deadline = time.monotonic() + 60
    while (left := set(Path("/tmp").glob("envloop-terminus-*")) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == set()
