"""The distribution of a profile's counted rewards, as the bars of a histogram.

Only counted rewards enter it (the job result's member rows): a missing reward is never a bar at
zero. A handful of distinct values (binary or graded rewards) gets one bar per value; anything
else is cut into equal-width bins between the smallest and the largest reward.
"""

from pydantic import BaseModel, Field

from envloop.core.metrics import ProfileMetrics

DISTINCT_LIMIT = 12
BINS = 10


class Bar(BaseModel):
    low: float
    high: float = Field(description="equal to low for a bar of one distinct value")
    count: int


class RewardHistogram(BaseModel):
    scored: int
    bars: list[Bar]


def reward_histogram(metrics: ProfileMetrics) -> RewardHistogram:
    rewards = [r for row in metrics.members for r in row.attempts if not isinstance(r, str)]
    if not rewards:
        return RewardHistogram(scored=0, bars=[])
    distinct = sorted(set(rewards))
    if len(distinct) <= DISTINCT_LIMIT:
        bars = [Bar(low=v, high=v, count=rewards.count(v)) for v in distinct]
        return RewardHistogram(scored=len(rewards), bars=bars)
    low, high = distinct[0], distinct[-1]
    width = (high - low) / BINS
    counts = [0] * BINS
    for reward in rewards:
        counts[min(int((reward - low) / width), BINS - 1)] += 1
    bars = [Bar(low=low + i * width, high=low + (i + 1) * width, count=c) for i, c in enumerate(counts)]
    return RewardHistogram(scored=len(rewards), bars=bars)
