"""What the model gateway adds to a model call: the same requests sent straight to a scripted
endpoint and through the gateway, interleaved one for one, for Chat Completions, the Responses API
and Messages, whole and streamed.

Three processes, as in a trial: the scripted endpoint (`python -m envloop.testing`, echoing a
prompt of `--words` words, streamed word by word), the gateway (this script with `--serve`, on an
event loop of its own, as in a worker) and the caller (this script: one keep-alive HTTP client).
Printed per protocol and mode: the median and 90th percentile of each path's latency (to the last
byte), the median of the paired differences (what the gateway adds per call) and, when streamed,
the added time to the first byte. Then the cost of adding and removing a listener.

    .venv/bin/python bench/gateway.py [--calls 200] [--words 100]
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-bench-upstream-key"


def _serve(upstream: str) -> None:
    """The gateway process: one session per protocol; prints their URLs and tokens, then runs
    until stdin closes."""
    from envloop.gateway import GatewaySettings, ModelGateway, Upstream  # noqa: PLC0415

    async def main() -> None:
        gateway = ModelGateway(GatewaySettings(allow_private_upstream=True))
        await gateway.start()
        openai = gateway.open_session(
            "trl_bench", Upstream(protocol="openai", base_url=upstream + "/v1", api_key=KEY)
        )
        anthropic = gateway.open_session(
            "trl_bench", Upstream(protocol="anthropic", base_url=upstream, api_key=KEY)
        )
        added = []
        for _ in range(50):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            began = time.perf_counter()
            listener = await gateway.add_listener(sock, trial_id="trl_bench")
            added.append(time.perf_counter() - began)
            began = time.perf_counter()
            await gateway.remove_listener(listener)
            added.append(time.perf_counter() - began)
        listeners = {
            "add_ms": statistics.median(added[::2]) * 1000,
            "remove_ms": statistics.median(added[1::2]) * 1000,
        }
        print(
            json.dumps(
                {
                    "openai": [openai.base_url, openai.token],
                    "anthropic": [anthropic.base_url, anthropic.token],
                    **listeners,
                }
            ),
            flush=True,
        )
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await gateway.stop()

    asyncio.run(main())


Request = tuple[str, dict[str, object], dict[str, str]]
"""Path after the base URL, JSON body, headers."""


def _requests(prompt: str) -> dict[str, Callable[[bool], Request]]:
    messages = [{"role": "user", "content": prompt}]
    return {
        "chat": lambda stream: (
            "/chat/completions",
            {"model": "m", "messages": messages, "stream": stream},
            {},
        ),
        "responses": lambda stream: ("/responses", {"model": "m", "input": prompt, "stream": stream}, {}),
        "messages": lambda stream: (
            "/v1/messages",
            {"model": "m", "max_tokens": 512, "messages": messages, "stream": stream},
            {"anthropic-version": "2023-06-01"},
        ),
    }


def _once(client: httpx.Client, url: str, key: str, request: Request) -> tuple[float, float]:
    """(seconds to the last byte, seconds to the first byte) of one call."""
    path, body, headers = request
    began = time.perf_counter()
    first = 0.0
    with client.stream(
        "POST", url + path, json=body, headers={**headers, "Authorization": f"Bearer {key}", "x-api-key": key}
    ) as response:
        assert response.status_code == 200, response.read()
        for _ in response.iter_raw():
            first = first or time.perf_counter() - began
    return time.perf_counter() - began, first


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200, help="calls per path, protocol and mode")
    parser.add_argument("--words", type=int, default=100, help="words in the prompt the endpoint echoes")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    endpoint = subprocess.Popen(
        [sys.executable, "-m", "envloop.testing", "--api-key", KEY],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert endpoint.stdout is not None
    upstream = endpoint.stdout.readline().strip()
    gateway = subprocess.Popen(
        [sys.executable, __file__, "--serve", upstream],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert gateway.stdout is not None and gateway.stdin is not None
    ready = json.loads(gateway.stdout.readline())
    try:
        prompt = " ".join(f"word{i}" for i in range(args.words))
        print(f"{args.calls} calls per path, interleaved; the endpoint echoes {args.words} words")
        columns = ("direct median/p90", "gateway median/p90", "added median", "added to 1st byte")
        print(f"{'':<20} {columns[0]:>20} {columns[1]:>20} {columns[2]:>13} {columns[3]:>18}")
        with httpx.Client(timeout=60) as client:
            for protocol, make in _requests(prompt).items():
                gateway_url, token = ready["anthropic" if protocol == "messages" else "openai"]
                direct_url = upstream if protocol == "messages" else upstream + "/v1"
                for stream in (False, True):
                    request = make(stream)
                    for _ in range(10):  # warm both paths' connections
                        _once(client, direct_url, KEY, request)
                        _once(client, gateway_url, token, request)
                    direct, through, added, added_first = [], [], [], []
                    for _ in range(args.calls):
                        last, first = _once(client, direct_url, KEY, request)
                        via_last, via_first = _once(client, gateway_url, token, request)
                        direct.append(last)
                        through.append(via_last)
                        added.append(via_last - last)
                        added_first.append(via_first - first)
                    name = f"{protocol} {'streamed' if stream else 'whole'}"
                    print(
                        f"{name:<20} {statistics.median(direct) * 1000:9.2f}/{_p90(direct) * 1000:.2f} ms"
                        f" {statistics.median(through) * 1000:9.2f}/{_p90(through) * 1000:.2f} ms"
                        f" {statistics.median(added) * 1000:10.2f} ms"
                        + (f" {statistics.median(added_first) * 1000:15.2f} ms" if stream else "")
                    )
        print(f"listener: add {ready['add_ms']:.2f} ms, remove {ready['remove_ms']:.2f} ms (median of 50)")
    finally:
        gateway.stdin.close()
        gateway.wait(timeout=30)
        endpoint.send_signal(signal.SIGTERM)
        endpoint.wait(timeout=30)


if __name__ == "__main__":
    main()
