"""The base of both clients: the operations envloop offers its callers, each declared once.

`envloop.Client` (over HTTP) and `envloop.LocalClient` (on the embedded store, in this process) are
both `Operations`: the same methods with the same parameters and return types, and the same
exception classes (`UserError`, `NotFoundError`, `ConflictError`, `ServerError`). Code written
against one runs against the other, and the CLI renders either.

Every operation is an `Operation` declaration (`envloop.operations.declared`, see
`envloop.operations.operation`): the method of each client, the HTTP route and the call into the
service layer all come from it, whether it answers a model, streams events or a file's bytes, or
uploads a folder. The methods written out below are made of declared operations, so both clients
share them.
"""

from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, cast

from pydantic import TypeAdapter, ValidationError

from envloop.errors import ServerError
from envloop.operations.declared import Declarations
from envloop.operations.operation import Operation, Req, Resp, one_line

if TYPE_CHECKING:
    from envloop.core.trajectory import Trajectory
    from envloop.wire import ArtifactInfo


class Operations(Declarations, ABC):
    """Everything a client of envloop can do; each method is the service function of the same name
    without its context argument."""

    @abstractmethod
    def call(self, operation: Operation[..., Req, Resp], request: Req) -> Resp:
        """Do a declared operation: what each method of a declaration calls."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def trial_steps(self, trial_id: str) -> "Trajectory | None":
        """The whole trajectory, read from its JSON (`trajectory_json`); `trial_step_page` reads it a
        page at a time."""
        from envloop.core.trajectory import Trajectory  # noqa: PLC0415 - only this method builds it

        document = b"".join(self.trajectory_json(trial_id))
        try:
            return cast("Trajectory | None", TypeAdapter(Trajectory | None).validate_json(document))
        except ValidationError as exc:
            raise ServerError(
                f"trial {trial_id}: its trajectory is not valid: {one_line(dict(exc.errors()[0]))}"
            ) from None

    def copy_artifacts(self, trial_id: str, dest: Path) -> "list[ArtifactInfo]":
        """Copy every kept file of the trial under `dest`, keeping their relative paths; a path that
        would land outside `dest` is refused before anything is written there."""
        items = self.list_artifacts(trial_id)
        root = Path(dest).resolve()
        targets = [(item, (root / item.path).resolve()) for item in items]
        for item, target in targets:
            if not target.is_relative_to(root):
                raise ServerError(f"artifact path {item.path!r} points outside {dest}")
        for item, target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as sink:
                for chunk in self.read_artifact(trial_id, item.path):
                    sink.write(chunk)
        return items
