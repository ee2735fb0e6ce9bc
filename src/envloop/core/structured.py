"""Declared structured results (`/logs/verifier/result.json`): validation and per-job aggregation.

A verifier may report more than one number: a composite score, named dimensions and judge
summaries. Each dimension declares its scale and scoring direction, because a field called
`accuracy` is not enough to know that two verifiers measure the same quantity: values are only
averaged, or compared, across trials whose definitions (name, scale, direction and the verifier's
declared version) agree. None of this ever replaces the primary reward used for ranking.

An invalid file yields no projection at all, with the reason; the raw file stays in the artifacts.

    {
      "schema_version": "envloop.result/v1",          optional
      "verifier_version": "2",                        optional
      "composite": 0.82,                              optional
      "dimensions": {
        "correctness": {"value": 0.9, "scale": [0, 1], "direction": "higher"},
        "latency_s": {"value": 12.5, "scale": [0, null], "direction": "lower"}
      },
      "judges": [{"name": "style", "model": "judge-1", "score": 4, "summary": "Clear and short."}]
    }
"""

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from envloop.core.lazy import LazyModel
from envloop.core.stats import clustered_stderr, t_interval
from envloop.core.words import plural

SchemaVersion = Literal["envloop.result/v1"]
SCHEMA_VERSION: SchemaVersion = "envloop.result/v1"
MAX_BYTES = 1_000_000

Direction = Literal["higher", "lower"]
Finite = Annotated[float, Field(allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=200)]


class Dimension(LazyModel):
    """One named measurement with its own units: `scale` is [low, high], null for an open end."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: Finite
    scale: tuple[Finite | None, Finite | None]
    direction: Direction

    @model_validator(mode="after")
    def _within_scale(self) -> "Dimension":
        low, high = self.scale
        if low is not None and high is not None and not low < high:
            raise ValueError(f"scale [{low}, {high}] must have low < high")
        if (low is not None and self.value < low) or (high is not None and self.value > high):
            raise ValueError(f"value {self.value} lies outside its scale {list(self.scale)}")
        return self


class JudgeSummary(LazyModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    summary: str = Field(max_length=20_000)
    model: str | None = Field(default=None, max_length=200)
    score: Finite | None = None


class StructuredResult(LazyModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: SchemaVersion = SCHEMA_VERSION
    verifier_version: str | None = Field(default=None, max_length=100)
    composite: Finite | None = None
    dimensions: dict[Name, Dimension] = Field(default_factory=dict)
    judges: list[JudgeSummary] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> "StructuredResult":
        if self.composite is None and not self.dimensions and not self.judges:
            raise ValueError("declares neither a composite, nor dimensions, nor judges")
        return self


class StructuredReading(LazyModel):
    """A trial's result.json as read: the validated projection, or why there is none."""

    model_config = ConfigDict(frozen=True)

    result: StructuredResult | None
    error: str | None = Field(default=None, description="why the file gave no projection")


def parse_structured(raw: bytes) -> StructuredReading:
    """Validate the bytes of a result.json; any problem becomes a one-line reason, never an exception."""
    if len(raw) > MAX_BYTES:
        return StructuredReading(result=None, error=f"result.json is larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return StructuredReading(result=None, error="result.json is not UTF-8 text")
    except json.JSONDecodeError as exc:
        return StructuredReading(
            result=None, error=f"result.json is not valid JSON ({exc.msg} at line {exc.lineno})"
        )
    except RecursionError:
        return StructuredReading(result=None, error="result.json is nested too deeply")
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        return StructuredReading(result=None, error=f"result.json is not valid JSON ({str(exc)[:100]})")
    if not isinstance(data, dict):
        return StructuredReading(result=None, error="result.json is not a JSON object")
    try:
        return StructuredReading(result=StructuredResult.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        return StructuredReading(result=None, error=f"result.json {where or 'document'}: {message}")


def describe_reading(reading: StructuredReading) -> list[str]:
    """Lines for a person: composite, dimensions with their scale and direction, judge summaries."""
    result = reading.result
    if result is None:
        return [f"structured result invalid: {reading.error} (the raw file is kept in the artifacts)"]
    version = f" (verifier {result.verifier_version})" if result.verifier_version else ""
    lines = [f"structured result{version}"]
    if result.composite is not None:
        lines.append(f"  composite {result.composite:g}")
    for name, dim in result.dimensions.items():
        definition = Definition(scale=dim.scale, direction=dim.direction, verifier_version=None)
        lines.append(f"  {name} {dim.value:g} on {definition.describe()}")
    for judge in result.judges:
        by = f" ({judge.model})" if judge.model else ""
        score = f" {judge.score:g}" if judge.score is not None else ""
        summary = judge.summary.strip().splitlines()[0][:200] if judge.summary.strip() else ""
        lines.append(f"  judge {judge.name}{by}{score}: {summary}")
    return lines


class Definition(LazyModel):
    """What must agree before two values of a dimension may be averaged or compared."""

    model_config = ConfigDict(frozen=True)

    scale: tuple[float | None, float | None]
    direction: Direction
    verifier_version: str | None

    def describe(self) -> str:
        low, high = ("open" if end is None else f"{end:g}" for end in self.scale)
        version = f", verifier {self.verifier_version}" if self.verifier_version else ""
        return f"[{low}, {high}] {self.direction} is better{version}"


def definition_conflict(name: str, a: Definition, b: Definition) -> str | None:
    """Why dimension `name` under definitions a and b measures different things; None if it does not."""
    for attribute, label in (
        ("scale", "scale"),
        ("direction", "direction"),
        ("verifier_version", "verifier version"),
    ):
        if getattr(a, attribute) != getattr(b, attribute):
            return f"{name}: {label} differs ({a.describe()} vs {b.describe()})"
    return None


class Aggregate(LazyModel):
    """Mean of a structured value over trials, with its task-clustered uncertainty."""

    model_config = ConfigDict(frozen=True)

    mean: float
    stderr: float | None
    ci95: tuple[float, float] | None
    trials: int
    tasks: int


class DimensionSummary(LazyModel):
    """One dimension across a profile's trials: an aggregate only when every definition agrees."""

    model_config = ConfigDict(frozen=True)

    definition: Definition | None = Field(description="the shared definition; null when they conflict")
    aggregate: Aggregate | None
    trials: int
    conflict: str | None = Field(default=None, description="why nothing is aggregated")


class StructuredSummary(LazyModel):
    """Structured results of one profile in one job (trials counted: finished, not invalidated)."""

    model_config = ConfigDict(frozen=True)

    trials: int = Field(description="trials with a valid result.json")
    invalid: int = Field(description="trials whose result.json was invalid (kept raw in artifacts)")
    composite: Aggregate | None
    dimensions: dict[str, DimensionSummary]


def aggregate(values_by_task: dict[str, list[float]], scale: tuple[float | None, float | None]) -> Aggregate:
    """Attempt-weighted mean, stderr clustered by task, t interval clamped to a closed scale."""
    clusters = list(values_by_task.values())
    values = [v for cluster in clusters for v in cluster]
    mean = math.fsum(values) / len(values)
    stderr = clustered_stderr(clusters)
    ci95 = None
    if stderr is not None:
        low, high = scale
        clamp = (low, high) if low is not None and high is not None else None
        ci95 = t_interval(mean, stderr, len(clusters) - 1, clamp=clamp)
    return Aggregate(mean=mean, stderr=stderr, ci95=ci95, trials=len(values), tasks=len(clusters))


@dataclass
class Collected:
    """Structured values of one profile grouped by task, as both aggregation and comparison need them."""

    valid: int = 0
    invalid: int = 0
    composite: dict[str, list[float]] = field(default_factory=dict)
    definitions: dict[str, dict[Definition, int]] = field(default_factory=dict)
    """Per dimension: each definition seen and in how many trials."""
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """Per dimension: task -> values."""

    def definition(self, name: str) -> Definition | None:
        """The one definition of `name` here; None when trials disagree (or never report it)."""
        seen = self.definitions.get(name, {})
        return next(iter(seen)) if len(seen) == 1 else None


def collect(readings: Iterable[tuple[str, StructuredReading]]) -> Collected:
    """Group (task, reading) pairs of one profile; each pair is one counted trial."""
    collected = Collected()
    for task, reading in readings:
        result = reading.result
        if result is None:
            collected.invalid += 1
            continue
        collected.valid += 1
        if result.composite is not None:
            collected.composite.setdefault(task, []).append(result.composite)
        for name, dim in result.dimensions.items():
            definition = Definition(
                scale=dim.scale, direction=dim.direction, verifier_version=result.verifier_version
            )
            seen = collected.definitions.setdefault(name, {})
            seen[definition] = seen.get(definition, 0) + 1
            collected.values.setdefault(name, {}).setdefault(task, []).append(dim.value)
    return collected


def summarize(collected: Collected) -> StructuredSummary:
    return StructuredSummary(
        trials=collected.valid,
        invalid=collected.invalid,
        composite=aggregate(collected.composite, (None, None)) if collected.composite else None,
        dimensions={name: _dimension(name, collected) for name in sorted(collected.definitions)},
    )


def _dimension(name: str, collected: Collected) -> DimensionSummary:
    seen = collected.definitions[name]
    trials = sum(seen.values())
    definition = collected.definition(name)
    if definition is None:
        ranked = sorted(seen.items(), key=lambda item: (-item[1], item[0].describe()))
        parts = "; ".join(f"{d.describe()} in {plural(n, 'trial')}" for d, n in ranked)
        return DimensionSummary(
            definition=None, aggregate=None, trials=trials, conflict=f"{name} is defined differently: {parts}"
        )
    return DimensionSummary(
        definition=definition, aggregate=aggregate(collected.values[name], definition.scale), trials=trials
    )
