"""The Ray executor: each claimed trial runs as a Ray task on a node of a Ray cluster, sized by its
task's needs (task.toml `[environment] cpus` and `memory_mb` become Ray's `num_cpus` and `memory`).

The worker keeps everything durable: it claims and leases the trial, records its outcome once and
publishes its files. A node gets the spec and the task archive (through Ray's object store, packed
once per task), runs the runner in a directory of its own, and returns the outcome with the run's
kept files as one archive, which the worker unpacks as hostile input into the run's staging
directory. Nodes need envloop installed, but no access to the store, the artifact store or the
secret key; the profile's params, secret values included, travel inside the spec over Ray's own
connections (token authentication; TLS where the network is not trusted).

A node that dies mid-run raises RunLost: the worker hands the trial back to the queue and a new run,
on a live node, records the result once. Cancelling the call cancels the Ray task, first gently (the
runner tears its environment down), then by force. A trial that no node could ever hold fails at
once with `resource_exhausted` instead of waiting forever in Ray's queue.

Ray is the optional `ray` extra, imported only when this executor is used.
"""

import asyncio
import contextlib
import io
import logging
import math
import os
import shutil
import socket
import tarfile
import tempfile
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from envloop.core.status import ErrorType, TrialStatus
from envloop.core.trial import TrialError, TrialOutcome, TrialSpec
from envloop.environments.local.instance import instances_under, remove_instance
from envloop.errors import ServerError, UserError
from envloop.liveness import ended, start_time
from envloop.runners.registry import get_runner
from envloop.scheduling.executor import RunLost
from envloop.settings import settings
from envloop.store.artifacts import regular_files
from envloop.tasks.archive import extract_shared, pack_task, safe_extract
from envloop.tasks.harbor import load_task_config

CANCEL_GRACE_SEC = 5.0
"""How long a cancelled run may take to tear its environment down before its Ray worker is killed."""
_KEPT_ARCHIVES = 256
_NODES_TTL_SEC = 5.0
_MB = 1024 * 1024
_CONNECT_TIMEOUT_SEC = 5.0
_OWNER_FILE = "owner"
_UNOWNED_GRACE_SEC = 60.0


def _check_reachable(address: str) -> None:
    """Fail in seconds when nothing answers at a `host:port` address: joining an absent cluster
    would otherwise wait without end."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_TIMEOUT_SEC).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ServerError(f"could not reach the Ray cluster at {address}: {reason}") from None


def _pack_kept(root: Path) -> bytes:
    """The run's kept files (regular files only, never through a link) as one .tar.gz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, rel in regular_files(root):
            tar.add(path, arcname=rel, recursive=False)
    return buffer.getvalue()


def _unpacked_task(node_dir: Path, key: str, archive: bytes) -> Path:
    """This node's copy of a task, unpacked once per task (atomically: runs may race for it)."""
    target = node_dir / "task-cache" / key
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".archive-", suffix=".tar.gz") as file:
        file.write(archive)
        file.flush()
        return extract_shared(Path(file.name), target)


def _owner_alive(run_dir: Path) -> bool:
    """Whether the Ray worker process that made this run directory still runs (pid and start time)."""
    try:
        pid, started = (run_dir / _OWNER_FILE).read_text().split()
        return not ended(int(pid), float(started))
    except FileNotFoundError:  # just made, its owner not yet written
        return time.time() - run_dir.stat().st_mtime < _UNOWNED_GRACE_SEC
    except (OSError, ValueError):
        return False


def _sweep_dead_runs(base: Path) -> None:
    """Runs on this machine whose Ray worker died with its node leave their instance behind (a quota
    file system included): the next run on the machine removes them, when it starts and ends."""
    for run_dir in base.glob("*/runs/*"):
        if _owner_alive(run_dir):
            continue
        for instance in instances_under(run_dir / "instances"):
            with contextlib.suppress(OSError):
                remove_instance(instance)
        shutil.rmtree(run_dir, ignore_errors=True)


def run_on_node(spec_json: str, task_key: str | None, task_archive: bytes | None) -> tuple[str, bytes]:
    """The Ray task: one run of a trial on this node, in directories of its own."""
    import ray  # noqa: PLC0415  (runs on the Ray node, where ray is installed by definition)

    base = Path(tempfile.gettempdir()) / "envloop-ray"
    _sweep_dead_runs(base)
    node_dir = base / ray.get_runtime_context().get_node_id()[:16]
    run_dir = node_dir / "runs" / uuid.uuid4().hex
    try:
        kept = run_dir / "kept"
        kept.mkdir(parents=True)
        (run_dir / _OWNER_FILE).write_text(f"{os.getpid()} {start_time()}")
        (run_dir / "instances").mkdir()
        task_dir = None
        if task_key is not None and task_archive is not None:
            task_dir = _unpacked_task(node_dir, task_key, task_archive)
        spec = TrialSpec.model_validate_json(spec_json).model_copy(
            update={
                "task_dir": task_dir,
                "task_digest": None,  # unpacked here from what was sent: its digest is computed again
                "instance_root": run_dir / "instances",
                "artifacts_dir": kept,
                "builds_dir": node_dir / "builds",  # image build records of this node's Docker daemon
            }
        )
        outcome = asyncio.run(get_runner(spec.runner).run(spec))
        return outcome.model_dump_json(), _pack_kept(kept)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        # Again at the end: a node's Ray worker may still be dying when the next run starts (the
        # new run can follow its loss within a second), and its leftovers wait for no later run.
        _sweep_dead_runs(base)


def _unpack_kept(kept: bytes, target: Path) -> None:
    """Unpack a node's kept files into the run's (empty) staging directory, refusing any entry that
    could write outside it."""
    if target.is_dir() and not any(target.iterdir()):
        target.rmdir()
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tar.gz")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(kept)
        safe_extract(Path(name), target)
    finally:
        Path(name).unlink(missing_ok=True)


class RayExecutor:
    """Sends each trial to the Ray cluster at `address` (its GCS `host:port`, or `auto`)."""

    def __init__(self, address: str) -> None:
        try:
            import ray  # noqa: PLC0415
        except ImportError:
            raise UserError("the ray executor needs the ray extra: pip install 'envloop[ray]'") from None
        self._ray: Any = ray
        _check_reachable(address)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, namespace="envloop")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ServerError(f"could not join the Ray cluster at {address}: {first[:200]}") from None
        # The operator's trial settings apply to this worker's trials on every node (the model marks
        # which; the home, the store and the secret key stay on the worker).
        env = settings().trial_environ()
        # A lost run is handed back to the queue as a new run (recorded once), never retried by Ray.
        self._options: dict[str, Any] = {"max_retries": 0}
        if env:
            self._options["runtime_env"] = {"env_vars": env}
        self._remote = ray.remote(run_on_node)
        self._archives: OrderedDict[Path, Any] = OrderedDict()
        self._nodes: tuple[float, list[tuple[float, float]]] = (0.0, [])

    def cluster_cpus(self) -> int:
        return int(self._ray.cluster_resources().get("CPU", 0))

    async def execute(self, spec: TrialSpec) -> TrialOutcome:
        cpus, memory_mb = self._needs(spec)
        refusal = self._no_node_for(cpus, memory_mb)
        if refusal is not None:
            return TrialOutcome(
                status=TrialStatus.FAILED,
                error=TrialError(type=ErrorType.RESOURCE_EXHAUSTED, message=refusal),
            )
        options: dict[str, Any] = {**self._options, "num_cpus": cpus}
        if memory_mb:
            options["memory"] = memory_mb * _MB
        key = spec.task_dir.name if spec.task_dir is not None else None
        archive = await asyncio.to_thread(self._archive, spec.task_dir) if spec.task_dir is not None else None
        ref = self._remote.options(**options).remote(spec.model_dump_json(), key, archive)
        try:
            outcome_json, kept = await asyncio.wrap_future(ref.future())
        except asyncio.CancelledError:
            await self._cancel(ref)
            raise
        except (self._ray.exceptions.RayTaskError, self._ray.exceptions.TaskUnschedulableError):
            raise
        except self._ray.exceptions.RayError as exc:
            raise RunLost(f"its Ray node or worker was lost ({type(exc).__name__})") from exc
        await asyncio.to_thread(_unpack_kept, kept, spec.artifacts_dir)
        return TrialOutcome.model_validate_json(outcome_json)

    @staticmethod
    def _needs(spec: TrialSpec) -> tuple[float, int | None]:
        """(CPUs, MB of memory) the task asks for; one CPU when it does not say. Ray takes whole
        numbers above one CPU, so 1.5 becomes 2."""
        if spec.task_dir is None:
            return 1.0, None
        environment = load_task_config(spec.task_dir / "task.toml").environment
        cpus = environment.cpus or 1.0
        return (float(math.ceil(cpus)) if cpus > 1 else cpus), environment.memory_mb

    def _no_node_for(self, cpus: float, memory_mb: int | None) -> str | None:
        """Why no live node could ever hold the trial, or None if one could."""
        fetched, nodes = self._nodes
        if time.monotonic() - fetched > _NODES_TTL_SEC:
            nodes = [
                (float(n["Resources"].get("CPU", 0)), float(n["Resources"].get("memory", 0)) / _MB)
                for n in self._ray.nodes()
                if n.get("Alive")
            ]
            self._nodes = (time.monotonic(), nodes)
        if any(c >= cpus and m >= (memory_mb or 0) for c, m in nodes):
            return None
        largest = max(nodes, default=(0.0, 0.0))
        wanted = f"{cpus:g} CPUs" + (f" and {memory_mb} MB of memory" if memory_mb else "")
        biggest = f"{largest[0]:g} CPUs, {largest[1]:.0f} MB"
        return f"the task needs {wanted}; no node of the Ray cluster has that (largest: {biggest})"

    def _archive(self, task_dir: Path) -> Any:
        """The task's archive in Ray's object store, packed once per task (the last few are kept)."""
        if task_dir in self._archives:
            self._archives.move_to_end(task_dir)
            return self._archives[task_dir]
        with tempfile.TemporaryDirectory(prefix="envloop-ray-") as tmp:
            pack_task(task_dir, Path(tmp) / "task.tar.gz")
            ref = self._ray.put((Path(tmp) / "task.tar.gz").read_bytes())
        self._archives[task_dir] = ref
        while len(self._archives) > _KEPT_ARCHIVES:
            self._archives.popitem(last=False)
        return ref

    async def _cancel(self, ref: Any) -> None:
        """Cancel the Ray task gently, then by force if it is still running after the grace period."""
        self._ray.cancel(ref)
        future = asyncio.wrap_future(ref.future())
        done, _ = await asyncio.wait({future}, timeout=CANCEL_GRACE_SEC)
        if done and not future.cancelled():
            future.exception()  # retrieved: the task's cancellation is the expected end
        else:
            self._ray.cancel(ref, force=True)
