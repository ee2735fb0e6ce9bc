"""Specification of a job's usage and cost: tokens summed from the trials' recorded usage, priced by
the operator's price table (`ENVLOOP_PRICES`, else prices.toml in ENVLOOP_HOME) per MODEL_NAME with
every token priced once whichever way the protocol counts cached tokens, and the trials' durations.
A model the table does not price gets no cost and the reason, never a cost of 0."""

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from envloop.core.prices import ModelPrice, PriceTableError, parse_price_table, token_cost
from envloop.core.trial import TrialOutcome
from envloop.services import job_submission, profiles
from envloop.services.context import Context
from envloop.services.usage import NO_TABLE, job_usage
from envloop.store import queue
from envloop.store.tables import Trial
from tests.conftest import El, write_profile
from tests.test_compare_support import push_tasks

PRICES = """
currency = "USD"

[models."team-model/sft"]
input = 2.0
output = 10
cache_read = 0.5
"""


def test_the_price_table_reads_prices_per_million_tokens_and_refuses_bad_ones_in_one_line() -> None:
    table = parse_price_table(PRICES)
    assert table.currency == "USD" and table.models["team-model/sft"] == ModelPrice(
        input=2, output=10, cache_read=0.5
    )
    for text, message in (
        (
            '[models.m]\ninput = "2"\noutput = 1\n',
            "price table: models.m.input: Input should be a valid number",
        ),
        (
            "[models.m]\ninput = -1\noutput = 1\n",
            "price table: models.m.input: Input should be greater than or equal to 0",
        ),
        ("[models.m]\ninput = 1\n", "price table: models.m.output: Field required"),
        (
            "[models.m]\ninput = 1\noutput = 1\nprompt = 3\n",
            "price table: models.m.prompt: Extra inputs are not permitted",
        ),
        ("currency = ", "price table: Invalid value (at end of document)"),
    ):
        with pytest.raises(PriceTableError) as refused:
            parse_price_table(text)
        assert str(refused.value) == message


def test_each_token_is_priced_once_whichever_way_the_protocol_counts_cached_tokens() -> None:
    price = ModelPrice(input=2, output=10, cache_read=0.5)
    # OpenAI: 1,000 prompt tokens of which 400 cached; Anthropic: 600 input plus 400 cache reads.
    openai = token_cost(
        price, {"input_tokens": 1000, "cache_read_tokens": 400, "output_tokens": 100}, "openai"
    )
    anthropic = token_cost(
        price, {"input_tokens": 600, "cache_read_tokens": 400, "output_tokens": 100}, "anthropic"
    )
    assert openai == anthropic == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 10) / 1e6)
    no_cache_price = ModelPrice(input=2, output=10)
    assert token_cost(
        no_cache_price, {"input_tokens": 1000, "cache_read_tokens": 400}, "openai"
    ) == pytest.approx(2000 / 1e6)


def _job(ctx: Context, tmp_path: Path) -> str:
    dataset = push_tasks(ctx, tmp_path, "priced", ["t1", "t2", "t3"])
    for name, model in (("team/sft", "team-model/sft"), ("team/other", "team-model/other")):
        params = {"AGENT_NAME": "nop", "MODEL_NAME": model, "MODEL_PROTOCOL": "openai"}
        profiles.create_profile(
            ctx, name, "1", profiles.read_profile_file(write_profile(tmp_path / f"{model[-3:]}.json", params))
        )
    request = job_submission.JobRequest(dataset=dataset, profiles=["team/sft@1", "team/other@1"])
    job = job_submission.submit_job(ctx, request).job.id
    for number, trial in enumerate(queue.claim(ctx.store, "test", 100, 3600), start=1):
        usage = {"calls": 2, "input_tokens": 1000 * number, "output_tokens": 100, "cache_read_tokens": 0}
        assert queue.finish(ctx.store, trial, TrialOutcome(status="completed", reward=1.0, usage=usage))
    with ctx.store.write() as session:  # durations of 1, 2, ... 6 seconds
        ordered = session.scalars(select(Trial).where(Trial.job_id == job).order_by(Trial.id))
        for number, trial in enumerate(ordered, start=1):
            assert trial.started_at is not None
            trial.finished_at = trial.started_at + timedelta(seconds=number)
    return job


def test_tokens_cost_and_durations_per_profile_and_for_the_job(
    ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(ctx, tmp_path)
    without = job_usage(ctx, job)
    assert without.currency is None and without.cost is None
    assert {p.cost_note for p in without.profiles.values()} == {NO_TABLE}
    prices = tmp_path / "operator" / "prices.toml"
    prices.parent.mkdir()
    prices.write_text(PRICES)
    monkeypatch.setenv("ENVLOOP_PRICES", str(prices))
    found = job_usage(ctx, job)
    sft, other = found.profiles["team/sft@1"], found.profiles["team/other@1"]
    assert sft.trials == 3 and sft.calls == 6 and sft.output_tokens == 300
    assert sft.cost == pytest.approx((sft.input_tokens * 2 + 300 * 10) / 1e6)
    assert (
        other.cost is None and other.cost_note == "the price table has no price for model 'team-model/other'"
    )
    assert found.cost is None  # one profile has no price: the job has no total, never a partial one
    assert (found.input_tokens, found.calls) == (sft.input_tokens + other.input_tokens, 12)
    assert found.latency.trials == 6 and found.latency.max_sec == pytest.approx(6)
    assert found.latency.median_sec == pytest.approx(3.5) and found.latency.p90_sec == pytest.approx(6)
    prices.write_text("[models.x]\ninput = 'cheap'\n")
    broken = job_usage(ctx, job)
    assert broken.currency is None and str(tmp_path) not in str(broken.model_dump())
    assert sft.input_tokens == broken.profiles["team/sft@1"].input_tokens  # tokens and times still given
    assert broken.profiles["team/sft@1"].cost_note == (
        "price table: models.x.input: Input should be a valid number (ENVLOOP_PRICES)"
    )


def test_el_job_result_prints_usage_and_cost(el: El, ctx: Context, tmp_path: Path) -> None:
    job = _job(ctx, tmp_path)
    (el.home / "prices.toml").write_text(PRICES)
    text = el.ok("job", "result", job).stdout
    sft = next(line for line in text.splitlines() if line.startswith("team/sft@1: "))
    assert (
        sft.startswith("team/sft@1: 6 model calls, tokens")
        and "cost $0.0" in sft
        and "trial time median" in sft
    )
    assert "team/other@1: 6 model calls" in text and "no price for model 'team-model/other'" in text
    data = el.ok("job", "result", job, "--json").json()
    assert data["usage"]["profiles"]["team/sft@1"]["cost"] == pytest.approx(
        job_usage(ctx, job).profiles["team/sft@1"].cost
    )
