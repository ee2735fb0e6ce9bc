"""The kinds of declared operation beyond a JSON answer (`envloop.operations.operation`): events, a file's
bytes, an upload, and a field in its own query form. Each is declared here once, with its service
function below, and served by the real app under uvicorn and called through both real clients, so
what is tested is the mechanism that every such declaration gets, not one operation's code."""

import dataclasses
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, BeforeValidator, Field
from pydantic.dataclasses import dataclass

from envloop.api.routes.declared import build_router
from envloop.client import Client
from envloop.errors import NotFoundError, ServerError, UserError
from envloop.local import LocalClient
from envloop.operations import Operations
from envloop.operations.kinds import Download, Events, Upload
from envloop.operations.operation import Operation
from envloop.operations.services import ServiceModule
from envloop.services.context import Context
from envloop.wire import ArtifactInfo
from envloop.wire.request import REQUEST, QueryForm
from tests.api_server import Server, serve_in_process
from tests.conftest import El

# -- the requests and answers ----------------------------------------------------------------------


@dataclass(config=REQUEST, frozen=True)
class Countdown:
    start: int


class Tick(BaseModel):
    event: Literal["tick"] = "tick"
    left: int


class Lift(BaseModel):
    event: Literal["lift"] = "lift"


@dataclass(config=REQUEST, frozen=True)
class Blob:
    size: int
    name: str
    shift: Annotated[int, Field(ge=0)] = 0


@dataclass(config=REQUEST, frozen=True)
class Weigh:
    path: Annotated[Path, Field(description="what to weigh")]
    label: Annotated[str, Field(min_length=1, description="a label sent back")]
    note: Annotated[str | None, Field(description="optional")] = None


class Weight(BaseModel):
    label: str
    note: str | None
    files: dict[str, int]
    created: bool = True


def _pairs(value: Any) -> Any:
    return dict(item.partition(":")[::2] for item in value) if isinstance(value, list) else value


@dataclass(config=REQUEST, frozen=True)
class Echo:
    pairs: Annotated[
        dict[str, str] | None,
        BeforeValidator(_pairs),
        QueryForm("pair", list[str] | None, lambda pairs: [f"{k}:{v}" for k, v in pairs.items()]),
    ] = None


# -- the declarations, and their service functions ---------------------------------------------------

HERE = "tests.test_operation_kinds"
HERE_SERVICES = ServiceModule(HERE)


class Kinds:
    countdown = Events(
        "/v1/kinds/countdown/{start}",
        Countdown,
        cast("type[Tick | Lift]", Tick | Lift),
        service=HERE_SERVICES.countdown,
        tag="kinds",
        stream_doc="ticks, then end",
    )
    blob = Download("/v1/kinds/blob/{size}/{name:path}", Blob, service=HERE_SERVICES.blob, tag="kinds")
    ticks = Download(
        "/v1/kinds/ticks/{start}",
        Countdown,
        service=HERE_SERVICES.ticks,
        tag="kinds",
        media_type="application/json",
        schema=f"{HERE}:TickList",
        answer_doc="every tick, written as it is made",
    )
    weigh = Upload(
        "/v1/kinds/weigh",
        Weigh,
        Weight,
        file="path",
        part="upload",
        service=HERE_SERVICES.weigh,
        tag="kinds",
        status_code=201,
        existing=lambda weight: not weight.created,
    )
    echo = Operation("GET", "/v1/kinds/echo", Echo, dict[str, str], service=HERE_SERVICES.echo, tag="kinds")


KINDS = [value for value in vars(Kinds).values() if isinstance(value, Operation)]
GATE = threading.Event()
"""Set by a test to let the gated countdown finish."""


class CountdownFeed:
    """Counts down one tick a poll; a start of 99 waits at its first tick until GATE is set."""

    def __init__(self, start: int) -> None:
        if start < 0:
            raise NotFoundError(f"unknown countdown {start}")
        self.left, self.gated = start, start == 99
        self.finished = False

    @property
    def outcome(self) -> Tick:
        return Tick(left=self.left)

    def poll(self) -> list[Tick | Lift]:
        if self.gated and self.left < 99:
            if not GATE.is_set():
                return []
            self.left = 0
        if self.left == 0:
            self.finished = True
            return [Lift()]
        self.left -= 1
        return [Tick(left=self.left)]


def countdown(ctx: Context, start: int) -> CountdownFeed:
    return CountdownFeed(start)


def blob(ctx: Context, size: int, name: str, shift: int = 0) -> Path:
    if size < 0:
        raise UserError("bad blob")
    path = ctx.home / "blobs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes((i + shift) % 251 for i in range(size)))
    return path


TickList = list[Tick]


def ticks(ctx: Context, start: int) -> Iterator[str] | bytes:
    if start == 0:
        return b"[]"
    return iter(["[", ",".join(Tick(left=n).model_dump_json() for n in range(start)), "]"])


def weigh(ctx: Context, path: Path, label: str, note: str | None = None) -> Weight:
    if not path.exists():  # the HTTP client finds it out before sending anything
        raise UserError(f"{path}: no such file or directory")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    weights = {str(p.relative_to(path.parent)): p.stat().st_size for p in files}
    return Weight(label=label, note=note, files=weights, created=label != "again")


def echo(ctx: Context, pairs: dict[str, str] | None = None) -> dict[str, str]:
    return pairs or {}


class KindsClient(Client, Kinds):
    pass


class KindsLocal(LocalClient, Kinds):
    pass


@pytest.fixture
def kinds_server(el: El, store_url: str, tmp_path: Path) -> Iterator[Server]:
    def add_kinds(app: FastAPI) -> None:
        app.router.routes[0:0] = build_router(KINDS).routes  # before the catch-all of unknown paths

    running = serve_in_process(el, tmp_path / "serve.log", extend=add_kinds)
    yield running
    running.stop()


@pytest.fixture(params=["http", "local"])
def client(request: pytest.FixtureRequest, kinds_server: Server) -> Iterator[Operations]:
    if request.param == "http":
        with KindsClient(kinds_server.url, kinds_server.key) as over_http:
            yield over_http
    else:
        with KindsLocal(kinds_server.el.home, run_trials=False) as local:
            yield local


# -- events ----------------------------------------------------------------------------------------


def test_events_come_as_the_declared_models_until_the_feed_finishes(client: KindsClient) -> None:
    assert list(client.countdown(3)) == [Tick(left=2), Tick(left=1), Tick(left=0), Lift()]


def test_an_unknown_feed_fails_before_the_first_event(client: KindsClient) -> None:
    with pytest.raises(NotFoundError, match="unknown countdown -1"):
        next(iter(client.countdown(-1)))


def test_an_event_arrives_while_the_stream_is_still_open(kinds_server: Server) -> None:
    GATE.clear()
    opened = time.monotonic()
    timer = threading.Timer(20, GATE.set)
    timer.start()
    try:
        with KindsClient(kinds_server.url, kinds_server.key) as client:
            events = client.countdown(99)
            assert next(events) == Tick(left=98)
            assert not GATE.is_set(), "the first event came only when the stream ended"
            GATE.set()
            assert list(events) == [Lift()]
    finally:
        timer.cancel()
    assert time.monotonic() - opened < 20


def test_the_event_route_is_server_sent_events_ending_with_the_outcome(kinds_server: Server) -> None:
    with kinds_server.http() as http:
        response = http.get("/v1/kinds/countdown/1")
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.text.split("\n\n")[:3] == [
            'event: tick\ndata: {"event":"tick","left":0}',
            'event: lift\ndata: {"event":"lift"}',
            'event: end\ndata: {"event":"tick","left":0}',
        ]
        assert http.get("/v1/kinds/countdown/-1").json() == {"detail": "unknown countdown -1"}
        document = http.get("/openapi.json").json()["paths"]["/v1/kinds/countdown/{start}"]["get"]
        assert document["responses"]["200"]["description"] == "ticks, then end"


# -- downloads -------------------------------------------------------------------------------------


def test_a_download_streams_the_files_bytes_in_chunks(client: KindsClient) -> None:
    size = 3 * 1024 * 1024 + 17
    chunks = list(client.blob(size, "big.bin"))
    assert b"".join(chunks) == bytes(i % 251 for i in range(size))
    assert len(chunks) > 1 and max(len(chunk) for chunk in chunks) <= 1024 * 1024
    assert b"".join(client.blob(4, "shifted.bin", shift=250)) == bytes([250, 0, 1, 2])
    with pytest.raises(UserError, match="bad blob"):
        b"".join(client.blob(-1, "x"))
    with pytest.raises(UserError, match="shift"):
        b"".join(client.blob(1, "x", shift=-1))


def test_the_download_route_answers_range_requests(kinds_server: Server) -> None:
    with kinds_server.http() as http:
        whole = http.get("/v1/kinds/blob/1000/dir/small.bin")
        assert whole.headers["content-type"] == "application/octet-stream"
        assert whole.headers["content-length"] == "1000"
        part = http.get("/v1/kinds/blob/1000/dir/small.bin", headers={"Range": "bytes=10-19"})
        assert part.status_code == 206 and part.content == whole.content[10:20]


def test_a_json_download_is_written_as_it_is_made_and_typed_in_the_document(
    client: KindsClient, kinds_server: Server
) -> None:
    assert b"".join(client.ticks(2)) == b'[{"event":"tick","left":0},{"event":"tick","left":1}]'
    assert b"".join(client.ticks(0)) == b"[]"
    with kinds_server.http() as http:
        assert http.get("/v1/kinds/ticks/1").headers["content-type"] == "application/json"
        answer = http.get("/openapi.json").json()["paths"]["/v1/kinds/ticks/{start}"]["get"]["responses"][
            "200"
        ]
        assert answer["description"] == "every tick, written as it is made"
        assert answer["content"]["application/json"]["schema"]["items"] == {
            "$ref": "#/components/schemas/Tick"
        }


# -- uploads ---------------------------------------------------------------------------------------


def test_an_upload_sends_a_folder_packed_and_a_file_as_it_is(client: KindsClient, tmp_path: Path) -> None:
    folder = tmp_path / "bag"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "a.txt").write_text("abc")
    (folder / "b.txt").write_text("hello")
    weighed = client.weigh(folder, "bag", note="n")
    assert weighed.files == {"bag/inner/a.txt": 3, "bag/b.txt": 5}
    assert (weighed.label, weighed.note) == ("bag", "n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    assert client.weigh(rows, "rows").files == {"rows.jsonl": 3}
    with pytest.raises(UserError, match="no such file or directory"):
        client.weigh(tmp_path / "absent", "x")
    with pytest.raises(UserError, match="label"):
        client.weigh(rows, "")


def test_the_upload_route_takes_a_multipart_form_and_checks_what_it_unpacks(
    kinds_server: Server, tmp_path: Path
) -> None:
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        member = tarfile.TarInfo("../outside.txt")
        tar.addfile(member)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    with kinds_server.http() as http:
        with rows.open("rb") as handle:
            created = http.post("/v1/kinds/weigh", data={"label": "x"}, files={"upload": ("r.jsonl", handle)})
        assert created.status_code == 201 and created.json()["files"] == {"r.jsonl": 3}
        with rows.open("rb") as handle:
            again = http.post(
                "/v1/kinds/weigh", data={"label": "again"}, files={"upload": ("r.jsonl", handle)}
            )
        assert again.status_code == 200
        with archive.open("rb") as handle:
            refused = http.post(
                "/v1/kinds/weigh", data={"label": "x"}, files={"upload": ("e.tar.gz", handle)}
            )
        assert refused.status_code == 400
        assert "envloop-upload-" not in refused.json()["detail"]
        schema = http.get("/openapi.json").json()["paths"]["/v1/kinds/weigh"]["post"]["requestBody"]
        assert "multipart/form-data" in schema["content"]


# -- a field in its own query form -------------------------------------------------------------------


def test_a_field_travels_in_its_query_form(client: KindsClient, kinds_server: Server) -> None:
    assert client.echo({"a": "1", "b": "x:y"}) == {"a": "1", "b": "x:y"}
    assert client.echo() == {}
    with kinds_server.http() as http:
        assert http.get("/v1/kinds/echo", params={"pair": ["k:v", "j:"]}).json() == {"k": "v", "j": ""}
        (parameter,) = http.get("/openapi.json").json()["paths"]["/v1/kinds/echo"]["get"]["parameters"]
        assert parameter["name"] == "pair" and parameter["in"] == "query"


# -- a method made of declared operations -------------------------------------------------------------


class Canned(Operations):
    """A client whose trial keeps the given files (name: bytes)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def call(self, operation: Operation[..., Any, Any], request: Any) -> Any:
        if operation.name == "list_artifacts":
            return [ArtifactInfo(path=name, size=len(data)) for name, data in self.files.items()]
        assert operation.name == "read_artifact"
        return iter([self.files[dataclasses.asdict(request)["path"]]])

    def trial_steps(self, trial_id: str) -> None:
        return None

    def close(self) -> None:
        pass


def test_copied_artifacts_keep_their_paths_and_never_land_outside_the_destination(tmp_path: Path) -> None:
    copied = Canned({"a/b.txt": b"one", "c.txt": b"two"}).copy_artifacts("trial_x", tmp_path / "out")
    assert [item.path for item in copied] == ["a/b.txt", "c.txt"]
    assert (tmp_path / "out" / "a" / "b.txt").read_bytes() == b"one"
    with pytest.raises(ServerError, match="points outside"):
        Canned({"fine.txt": b"x", "../../escaped.txt": b"y"}).copy_artifacts("trial_x", tmp_path / "dest")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "dest").exists()


def test_an_unrouted_operation_is_answered_by_the_route_it_shares(kinds_server: Server) -> None:
    paths = httpx.get(f"{kinds_server.url}/openapi.json", timeout=30).json()["paths"]
    assert "/v1/jobs/{job_id}" in paths and "get" in paths["/v1/jobs/{job_id}"]
    assert paths["/v1/jobs/{job_id}"]["get"]["operationId"] == "get_job_v1_jobs__job_id__get"
    for client in (KindsClient(kinds_server.url, kinds_server.key), KindsLocal(kinds_server.el.home)):
        with client, pytest.raises(NotFoundError, match="unknown job 'job_nope'"):
            client.job_progress("job_nope")
