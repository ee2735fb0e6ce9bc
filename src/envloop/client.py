"""`envloop.Client`: the service layer's operations over the HTTP API, with the same names and types.

Each method is the service function of the same name without its context argument, and returns
the same pydantic model, so code (and the CLI) can switch between the embedded store and a server
without changing anything else. Errors come back as the same exception classes: bad input is a
`UserError`, unknown things a `NotFoundError`, contradictions a `ConflictError`.

    with Client() as client:             # ENVLOOP_URL and ENVLOOP_API_KEY
        job = client.submit_job(JobRequest(dataset="bench@1", profiles=["team/agent@1"])).job
        for event in client.watch_job(job.id):
            ...
"""

import re
import ssl
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from envloop.core.status import JobStatus
from envloop.core.trajectory import Trajectory
from envloop.operation import Operation, Req, Resp
from envloop.operations import Operations
from envloop.services.errors import ConflictError, NotFoundError, ServerError, UserError
from envloop.settings import settings
from envloop.wire import (
    ArtifactInfo,
    DatasetView,
    JobEvent,
    JobProgress,
    JobView,
    ProgressEvent,
    TrialEvent,
)

_M = TypeVar("_M")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class AccessError(UserError):
    """The server refused the credentials (401) or what they may do (403)."""


@contextmanager
def _transport(url: str) -> Iterator[None]:
    """A transport failure (refused, timed out, cut off mid-stream) as one ServerError line."""
    try:
        yield
    except httpx.TransportError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ServerError(f"lost the connection to the envloop server at {url}: {reason}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ServerError(
            f"the server at {url} answered something that is not the API's: {first['msg']}"
        ) from None


def _upload_stem(name: str) -> str:
    stem = _UNSAFE.sub("-", name).strip("-.") or "upload"
    return stem[:200]


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip().splitlines()[0] if response.text.strip() else response.reason_phrase
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        first = detail[0]
        where = ".".join(str(p) for p in first.get("loc", []) if p != "body")
        return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid"))
    return str(detail) if detail is not None else response.reason_phrase


def _tls_verification(url: str) -> ssl.SSLContext | bool:
    """Certificate checks for a server at `url`: the default (certifi's roots) for https; for plain
    http a context that trusts no one, since the client only sends paths under `url` and never
    follows redirects, so it is never used. Loading the roots costs tens of milliseconds, a large part
    of a short command's start-up against a local or in-cluster http server."""
    if url.lower().startswith("https://"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class Client(Operations):
    """A connection to an envloop server; `url` and `api_key` default to ENVLOOP_URL / ENVLOOP_API_KEY."""

    def __init__(self, url: str | None = None, api_key: str | None = None, timeout: float = 120.0) -> None:
        chosen = settings()
        url = url or chosen.url
        if not url:
            raise UserError("no server given: set ENVLOOP_URL (and ENVLOOP_API_KEY)")
        token = api_key if api_key is not None else chosen.api_key and chosen.api_key.get_secret_value()
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, verify=_tls_verification(self.url)
        )

    def close(self) -> None:
        self._http.close()

    def call(self, operation: Operation[..., Req, Resp], request: Req) -> Resp:
        """Send a declared operation's request to its route and read its answer."""
        path = operation.url(request)
        if operation.method == "GET":
            return self._parse(self._send("GET", path, params=operation.query(request)), operation.response)
        return self._parse(self._send("POST", path, json=operation.json_body(request)), operation.response)

    # -- plumbing -----------------------------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ServerError(f"cannot reach the envloop server at {self.url}: {reason}") from None
        self._check(response)
        return response

    @staticmethod
    def _check(response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        message = _detail(response)
        if status == 404:
            raise NotFoundError(message)
        if status == 409:
            raise ConflictError(message)
        if status in (401, 403):
            raise AccessError(message)
        if status < 500:
            raise UserError(message)
        raise ServerError(f"server error {status}: {message}")

    def _get(self, path: str, model: type[_M], **params: Any) -> _M:
        query = {k: v for k, v in params.items() if v is not None}
        return self._parse(self._send("GET", path, params=query), model)

    def _post(self, path: str, model: type[_M], body: BaseModel | dict[str, Any] | None = None) -> _M:
        payload = body.model_dump(mode="json") if isinstance(body, BaseModel) else (body or {})
        return self._parse(self._send("POST", path, json=payload), model)

    def _parse(self, response: httpx.Response, model: type[_M]) -> _M:
        with _transport(self.url):
            try:
                data = response.json()
            except ValueError:
                raise ServerError(f"the server at {self.url} answered something that is not JSON") from None
            return TypeAdapter(model).validate_python(data)

    @staticmethod
    def _ref(ref: str) -> str:
        return quote(ref, safe="@/")

    # -- datasets, profiles, runners ----------------------------------------------------------------

    def push_dataset(
        self, path: Path, name: str, runner: str | None = None, scorer: str | None = None
    ) -> DatasetView:
        """Upload a task directory, a folder of tasks (packed here) or a JSONL file as NAME@N."""
        path = Path(path)
        if not path.exists():
            raise UserError(f"{path}: no such file or directory")
        form = {k: v for k, v in {"name": name, "runner": runner, "scorer": scorer}.items() if v is not None}
        with tempfile.TemporaryDirectory(prefix="envloop-push-") as tmp:
            if path.is_file():
                upload, filename = path, f"{_upload_stem(path.stem)}.jsonl"
            else:
                upload, filename = Path(tmp) / "upload.tar.gz", f"{_upload_stem(path.name)}.tar.gz"
                self._pack(path.resolve(), upload)
            with upload.open("rb") as handle:
                response = self._send(
                    "POST", "/v1/datasets", data=form, files={"archive": (filename, handle)}
                )
        return DatasetView.model_validate(response.json())

    @staticmethod
    def _pack(root: Path, dest: Path) -> None:
        from envloop.tasks.digest import IGNORED_DIRS, IGNORED_FILES  # noqa: PLC0415 - only pushes pack

        def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            parts = Path(info.name).parts
            if any(p in IGNORED_DIRS for p in parts) or parts[-1] in IGNORED_FILES:
                return None
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            return info

        with tarfile.open(dest, "w:gz") as tar:
            tar.add(root, arcname=root.name, filter=keep)

    # -- jobs ---------------------------------------------------------------------------------------

    def job_progress(self, job_id: str) -> JobProgress:
        """The job's status and trial counts (a follower's poll when the event stream is gone)."""
        return JobProgress.model_validate(self.get_job(job_id).model_dump())

    def list_jobs(
        self,
        status: JobStatus | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[JobView]:
        """One page of jobs, newest first; the next page is `before` the last job of this one."""
        tag = [f"{k}={v}" for k, v in (tags or {}).items()] or None
        return self._get("/v1/jobs", list[JobView], status=status, tag=tag, limit=limit, before=before)

    def watch_job(self, job_id: str) -> Iterator[ProgressEvent]:
        """Job and trial status changes as they happen, until the job ends."""
        return self._events(f"/v1/jobs/{quote(job_id)}/events")

    # -- trials -------------------------------------------------------------------------------------

    def read_artifact(self, trial_id: str, relpath: str) -> Iterator[bytes]:
        """A kept file's bytes in chunks, streamed from the server."""
        url = f"/v1/trials/{quote(trial_id)}/artifacts/{quote(relpath, safe='/')}"
        with _transport(self.url), self._http.stream("GET", url) as response:
            if response.status_code >= 400:
                response.read()
                self._check(response)
            yield from response.iter_bytes()

    def trial_steps(self, trial_id: str) -> Trajectory | None:
        """The whole trajectory (the server streams it); `trial_step_page` reads it a page at a time."""
        return self._get(f"/v1/trials/{quote(trial_id)}/steps", Trajectory | None)  # type: ignore[arg-type]

    def copy_artifacts(self, trial_id: str, dest: Path) -> list[ArtifactInfo]:
        """Download every kept file of the trial under `dest`, keeping their relative paths."""
        items = self.list_artifacts(trial_id)
        root = Path(dest).resolve()
        for item in items:
            target = (root / item.path).resolve()
            if not target.is_relative_to(root):
                raise ServerError(f"artifact path {item.path!r} points outside {dest}")
            target.parent.mkdir(parents=True, exist_ok=True)
            url = f"/v1/trials/{quote(trial_id)}/artifacts/{quote(item.path, safe='/')}"
            with _transport(self.url), self._http.stream("GET", url) as response:
                if response.status_code >= 400:
                    response.read()
                    self._check(response)
                with target.open("wb") as sink:
                    for chunk in response.iter_bytes():
                        sink.write(chunk)
        return items

    # -- rollouts -----------------------------------------------------------------------------------

    def watch_rollout(self, trial_id: str) -> Iterator[ProgressEvent]:
        return self._events(f"/v1/rollouts/{quote(trial_id)}/events")

    # -- server-sent events -------------------------------------------------------------------------

    def _events(self, path: str) -> Iterator[ProgressEvent]:
        with (
            _transport(self.url),
            self._http.stream("GET", path, timeout=httpx.Timeout(30.0, read=None)) as response,
        ):
            if response.status_code >= 400:
                response.read()
                self._check(response)
            event, data = "", []
            for line in response.iter_lines():
                if line.startswith(":"):
                    continue
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line:
                    payload = "\n".join(data)
                    if event == "end":
                        return
                    if event == "job":
                        yield JobEvent.model_validate_json(payload)
                    elif event == "trial":
                        yield TrialEvent.model_validate_json(payload)
                    event, data = "", []


__all__ = ["AccessError", "Client", "ServerError"]
