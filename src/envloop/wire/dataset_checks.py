"""The request of `el dataset check`; its answer is `core.dataset_health.DatasetHealth`."""

from typing import Annotated

from pydantic import Field
from pydantic.dataclasses import dataclass

from envloop.core.dataset_health import DatasetHealth, TaskHealth
from envloop.core.trial import MAX_VERIFIER_RUNS, EnvironmentChoice
from envloop.wire.jobs import MAX_ATTEMPTS
from envloop.wire.request import REQUEST

__all__ = ["CheckDataset", "DatasetHealth", "TaskHealth"]


@dataclass(config=REQUEST, frozen=True)
class CheckDataset:
    ref: Annotated[str, Field(description="NAME@N or NAME@latest")]
    attempts: Annotated[
        int,
        Field(ge=1, le=MAX_ATTEMPTS, description="runs of the oracle (and of the nop agent) on each task"),
    ] = 3
    environment: Annotated[
        EnvironmentChoice | None,
        Field(description="where the tasks run (local, docker, auto); unset, each worker's own choice"),
    ] = None
    verifier_runs: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_VERIFIER_RUNS,
            description="times the verifier judges each of the oracle's final states; verdicts that differ "
            "mean a flaky verifier",
        ),
    ] = 3
