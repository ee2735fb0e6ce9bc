"""The gateway's byte handling on its own: the key is masked however an upstream cuts its bytes,
streams are cut into whole events whatever the chunking and line endings, and an event too long
to read passes through masked instead of being held."""

import json
import random

from envloop.gateway.to_agent import MASK, EventSplitter, Masker, parse_event

KEY = "sk-upstream-real-key-7f3a9c"


def test_a_key_cut_across_any_chunks_of_a_body_is_masked() -> None:
    body = f'{{"error": {{"message": "bad key {KEY}, and again {KEY}"}}}}'.encode()
    rng = random.Random(7)
    for _ in range(200):
        masker, out, start = Masker(KEY), b"", 0
        while start < len(body):
            end = start + rng.randint(1, 9)
            out += masker.feed(body[start:end])
            start = end
        out += masker.flush()
        assert out == body.replace(KEY.encode(), MASK)


def test_without_a_key_bytes_pass_at_once() -> None:
    masker = Masker(None)
    assert masker.feed(b"abc") == b"abc" and masker.flush() == b""


def test_a_key_that_json_escapes_is_masked_in_both_spellings() -> None:
    key = 'sk-with/"quote'
    masked = Masker(key).mask(json.dumps({"k": key}).encode() + key.encode())
    assert key.encode() not in masked and json.dumps(key)[1:-1].encode() not in masked


def test_events_are_cut_whole_whatever_the_chunking_and_line_endings() -> None:
    stream = b"event: a\ndata: 1\n\ndata: 2\r\n\r\n: comment\n\ndata: [DONE]\n\n"
    rng = random.Random(3)
    for _ in range(200):
        splitter, events, start = EventSplitter(Masker(KEY), limit=1024), [], 0
        while start < len(stream):
            end = start + rng.randint(1, 5)
            events += splitter.feed(stream[start:end])
            start = end
        assert splitter.flush() == b""
        assert [raw for raw, whole in events if whole] == [
            b"event: a\ndata: 1\n\n",
            b"data: 2\r\n\r\n",
            b": comment\n\n",
            b"data: [DONE]\n\n",
        ]
    assert [parse_event(raw) for raw, _ in events] == [("a", 1), (None, 2), (None, None), (None, "[DONE]")]


def test_an_event_over_the_limit_passes_through_masked_and_unparsed() -> None:
    splitter = EventSplitter(Masker(KEY), limit=64)
    big = b"data: " + b"x" * 100 + KEY.encode() + b"y" * 100 + b"\n\n"
    out = b""
    for start in range(0, len(big), 10):
        out += b"".join(raw for raw, whole in splitter.feed(big[start : start + 10]) if not whole)
    out += splitter.flush()
    tail = splitter.feed(b"data: 3\n\n")
    assert out + b"".join(raw for raw, whole in tail if not whole) == big.replace(KEY.encode(), MASK)
    assert [raw for raw, whole in tail if whole] == [b"data: 3\n\n"] and splitter.skipped
