"""Geometry of the console's charts, drawn as inline SVG by the templates: the pass@k / pass^k
curve, the reward histogram, and the compare pages' histograms of several runs overlaid. Only
coordinates are computed here; the values come from the services (the job result's curve,
`services.distribution`) and their labels from `core.display`."""

from dataclasses import dataclass

from envloop.core.display import format_score
from envloop.core.metrics import CurvePoint
from envloop.services.distribution import Bar, RewardHistogram, rewards_histogram

WIDTH, HEIGHT = 360, 180
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 10, 30


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class CurveChart:
    at_k: str
    """SVG polyline points of pass@k."""
    hat_k: str
    at_marks: list[Mark]
    hat_marks: list[Mark]
    x_ticks: list[Tick]
    y_ticks: list[Tick]


@dataclass(frozen=True)
class BarShape:
    x: float
    y: float
    width: float
    height: float
    label: str
    """What the bar holds, e.g. "100%" (one value) or "30% – 40%" (a bin)."""
    count: int


@dataclass(frozen=True)
class HistogramChart:
    bars: list[BarShape]
    """Every bin, empty ones included (height 0), in axis order."""
    x_ticks: list[Tick]
    y_ticks: list[Tick]


PLOT_W = WIDTH - LEFT - RIGHT
PLOT_H = HEIGHT - TOP - BOTTOM


def _y(rate: float) -> float:
    return TOP + PLOT_H * (1.0 - rate)


def _rate_ticks() -> list[Tick]:
    return [Tick(_y(v), format_score(v)) for v in (0.0, 0.25, 0.5, 0.75, 1.0)]


def curve_chart(points: list[CurvePoint]) -> CurveChart:
    depth = max(len(points), 1)

    def x(k: int) -> float:
        return LEFT + (PLOT_W * (k - 1) / (depth - 1) if depth > 1 else PLOT_W / 2)

    at = [Mark(x(p.k), _y(p.pass_at_k), f"pass@{p.k} {format_score(p.pass_at_k)}") for p in points]
    hat = [Mark(x(p.k), _y(p.pass_hat_k), f"pass^{p.k} {format_score(p.pass_hat_k)}") for p in points]
    step = max(1, depth // 8)
    ticks = [Tick(x(p.k), str(p.k)) for p in points if (p.k - 1) % step == 0 or p.k == depth]
    return CurveChart(
        at_k=" ".join(f"{m.x:.1f},{m.y:.1f}" for m in at),
        hat_k=" ".join(f"{m.x:.1f},{m.y:.1f}" for m in hat),
        at_marks=at,
        hat_marks=hat,
        x_ticks=ticks,
        y_ticks=_rate_ticks(),
    )


def _bar_label(bar: Bar) -> str:
    if bar.value is not None:
        return format_score(bar.value)
    return f"{format_score(bar.low)} – {format_score(bar.high)}"


def histogram_chart(histogram: RewardHistogram) -> HistogramChart:
    """Bins side by side on the rewards' axis, each with its count above it; ticks at bin edges
    (every other one when there are more than six bins)."""
    top = max((b.count for b in histogram.bars), default=0)
    slots = max(len(histogram.bars), 1)
    width = PLOT_W / slots
    bars = []
    for i, bar in enumerate(histogram.bars):
        height = PLOT_H * bar.count / top if top else 0.0
        bars.append(
            BarShape(
                x=LEFT + i * width + 1,
                y=TOP + PLOT_H - height,
                width=max(width - 2, 1.0),
                height=height,
                label=_bar_label(bar),
                count=bar.count,
            )
        )
    step = 2 if slots > 6 else 1
    if len(histogram.bars) == 1 and histogram.bars[0].low == histogram.bars[0].high:
        x_ticks = [Tick(LEFT + PLOT_W / 2, format_score(histogram.bars[0].low))]
    else:
        edges = [b.low for b in histogram.bars] + [histogram.bars[-1].high] if histogram.bars else []
        x_ticks = [Tick(LEFT + i * width, format_score(e)) for i, e in enumerate(edges) if i % step == 0]
    counts = sorted({0, top} | ({top // 2} if top % 2 == 0 else set())) if top else []
    y_ticks = [Tick(TOP + PLOT_H * (1 - n / top), str(n)) for n in counts]
    return HistogramChart(bars=bars, x_ticks=x_ticks, y_ticks=y_ticks)


@dataclass(frozen=True)
class Series:
    label: str
    """A, B, or B1, B2, … as the compare pages name the runs."""
    bars: list[BarShape]


@dataclass(frozen=True)
class OverlayChart:
    """Several runs' reward histograms on one axis and one count scale, their bars side by side in
    each bin in the order the runs are named (A first)."""

    series: list[Series]
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def overlay_chart(histograms: dict[str, RewardHistogram]) -> OverlayChart:
    """Histograms of the same bins (`services.distribution.rewards_histogram` on one axis), by label."""
    top = max((bar.count for h in histograms.values() for bar in h.bars), default=0)
    shared = next((h for h in histograms.values() if h.bars), RewardHistogram(scored=0, rates=True, bars=[]))
    single = histogram_chart(shared)
    slots = max(len(shared.bars), 1)
    width = PLOT_W / slots
    share = (width - 2) / max(len(histograms), 1)

    def shapes(histogram: RewardHistogram, offset: int) -> list[BarShape]:
        found = []
        for i, bar in enumerate(histogram.bars):
            height = PLOT_H * bar.count / top if top else 0.0
            found.append(
                BarShape(
                    x=LEFT + i * width + 1 + offset * share,
                    y=TOP + PLOT_H - height,
                    width=max(share, 0.5),
                    height=height,
                    label=_bar_label(bar),
                    count=bar.count,
                )
            )
        return found

    counts = sorted({0, top} | ({top // 2} if top % 2 == 0 else set())) if top else []
    return OverlayChart(
        series=[Series(label, shapes(h, n)) for n, (label, h) in enumerate(histograms.items())],
        x_ticks=single.x_ticks,
        y_ticks=[Tick(TOP + PLOT_H * (1 - n / top), str(n)) for n in counts],
    )


def rewards_overlay(rewards: dict[str, list[float]]) -> OverlayChart | None:
    """Each run's counted rewards binned on the axis of them all; none before any run has one."""
    axis = [reward for found in rewards.values() for reward in found]
    if not axis:
        return None
    return overlay_chart({label: rewards_histogram(found, axis) for label, found in rewards.items()})
