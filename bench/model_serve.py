"""`el model serve` under load from the official SDKs: the real command with two aliases of the
bundled SmolLM2-135M-Instruct (`base`, and `sft` with a system prompt), answering the question set
of `examples/qa/basics.jsonl` over each protocol, plain and streamed.

Printed per protocol and mode: requests, generated tokens per second over the wall time, each
request's latency (median and 90th percentile) and, when streamed, the time to the first text.
Requests are sequential: the endpoint generates one answer at a time per weights file.

    .venv/bin/python bench/model_serve.py [--questions 26] [--max-tokens 48] [--threads 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anthropic
import openai

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "examples" / "qa" / "basics.jsonl"
Call = Callable[[str, str], tuple[int, float | None]]
"""(model, prompt) → (output tokens, seconds to the first text or None)."""


def _serve(home: Path, threads: int) -> tuple[subprocess.Popen[str], str, str]:
    env = {**os.environ, "ENVLOOP_HOME": str(home)}
    el = [sys.executable, "-m", "envloop"]
    key = subprocess.run([*el, "key", "create"], env=env, capture_output=True, text=True, check=True).stdout
    proc = subprocess.Popen(
        [*el, "model", "serve", "--port", "0", "--threads", str(threads), "--model", "base", "--model", "sft",
         "--set", "sft.system_prompt=Answer the question with a single word or number."],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip(), key.strip()


def _measure(name: str, call: Call, prompts: list[str]) -> None:
    latencies: list[float] = []
    firsts: list[float] = []
    tokens = 0
    started = time.monotonic()
    for index, prompt in enumerate(prompts):
        begun = time.monotonic()
        produced, first = call("smollm2/sft" if index % 2 else "smollm2/base", prompt)
        latencies.append(time.monotonic() - begun)
        tokens += produced
        if first is not None:
            firsts.append(first)
    wall = time.monotonic() - started
    p90 = statistics.quantiles(latencies, n=10)[-1] if len(latencies) > 1 else latencies[0]
    line = (
        f"{name:<22} {len(prompts)} requests  {tokens / wall:6.1f} generated tokens/s  "
        f"latency median {statistics.median(latencies):.2f} s, p90 {p90:.2f} s"
    )
    if firsts:
        line += f"  first text median {statistics.median(firsts):.2f} s"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=26)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    prompts = [json.loads(line)["prompt"] for line in QUESTIONS.read_text().splitlines()][: args.questions]
    with tempfile.TemporaryDirectory() as scratch:
        began = time.monotonic()
        proc, url, key = _serve(Path(scratch) / "home", args.threads)
        print(f"el model serve ready in {time.monotonic() - began:.1f} s (two aliases, one weights file)")
        try:
            oa = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=300)
            an = anthropic.Anthropic(
                base_url=url.removesuffix("/v1"), api_key=key, max_retries=0, timeout=300
            )
            limit = args.max_tokens

            def openai_plain(model: str, prompt: str) -> tuple[int, float | None]:
                reply = oa.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": prompt}],
                    max_tokens=limit,
                    temperature=0,
                )
                return (reply.usage.completion_tokens if reply.usage else 0), None

            def openai_stream(model: str, prompt: str) -> tuple[int, float | None]:
                begun, first, count = time.monotonic(), None, 0
                for chunk in oa.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": prompt}], max_tokens=limit, stream=True
                ):
                    if chunk.choices and chunk.choices[0].delta.content:
                        first = first if first is not None else time.monotonic() - begun
                        count += 1
                return count, first

            def anthropic_plain(model: str, prompt: str) -> tuple[int, float | None]:
                reply = an.messages.create(
                    model=model, max_tokens=limit, messages=[{"role": "user", "content": prompt}]
                )
                return reply.usage.output_tokens, None

            def anthropic_stream(model: str, prompt: str) -> tuple[int, float | None]:
                begun, first = time.monotonic(), None
                with an.messages.stream(
                    model=model, max_tokens=limit, messages=[{"role": "user", "content": prompt}]
                ) as stream:
                    for _ in stream.text_stream:
                        first = first if first is not None else time.monotonic() - begun
                    return stream.get_final_message().usage.output_tokens, first

            _measure("openai", openai_plain, prompts)
            _measure("openai streamed", openai_stream, prompts)
            _measure("anthropic", anthropic_plain, prompts)
            _measure("anthropic streamed", anthropic_stream, prompts)
        finally:
            proc.terminate()
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()
