"""JSONL rows: each non-blank line is a named, digested member; errors name file, line and field."""

import hashlib
import json
from pathlib import Path

import pytest

from envloop.tasks.jsonl import (
    SCORERS,
    jsonl_digest,
    load_jsonl,
    parse_numeric,
    row_digest,
)
from envloop.tasks.model import ChatRow, TaskFormatError
from envloop.tasks.scorers import validate_scorer


def _write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(TaskFormatError) as caught:
        load_jsonl(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_rows_load_with_explicit_and_default_ids(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "q.jsonl",
        '{"id": "capital-fr", "prompt": "Capital of France?", "answer": "Paris"}',
        '{"prompt": "2+2?", "answer": "4", "metadata": {"topic": "math"}}',
        '{"prompt": "Largest planet?", "answer": "Jupiter"}',
    )

    rows = load_jsonl(path)

    assert [row.id for row in rows] == ["capital-fr", "q0002", "q0003"]
    assert rows[1].metadata == {"topic": "math"}


def test_default_ids_count_rows_not_lines_so_blank_lines_change_nothing(tmp_path: Path) -> None:
    dense = _write(tmp_path / "a.jsonl", '{"prompt": "a", "answer": "1"}', '{"prompt": "b", "answer": "2"}')
    sparse = _write(
        tmp_path / "b.jsonl",
        "",
        '{"prompt": "a", "answer": "1"}',
        "   ",
        "",
        '{"prompt": "b", "answer": "2"}',
    )

    assert [r.id for r in load_jsonl(sparse)] == ["q0001", "q0002"]
    assert jsonl_digest(load_jsonl(dense)) == jsonl_digest(load_jsonl(sparse))


def test_numeric_answers_and_ids_are_kept_as_their_json_text(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "n.jsonl", '{"id": 17, "prompt": "6*7?", "answer": 42}', '{"prompt": "pi?", "answer": 3.5}'
    )

    rows = load_jsonl(path)

    assert [(r.id, r.answer) for r in rows] == [("17", "42"), ("q0002", "3.5")]


def test_missing_answer_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "sets" / "q.jsonl",
        '{"prompt": "a", "answer": "1"}',
        "",
        '{"prompt": "b", "answer": "2"}',
        '{"prompt": "c"}',
    )

    assert _error(path) == f"{path}: line 4: answer: field required"


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.jsonl", '{"prompt": "a", "answer": "1"}', '{"prompt": "b", answer: 2}')

    assert _error(path).startswith(f"{path}: line 2: invalid JSON (")


def test_nan_is_not_valid_json(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.jsonl", '{"prompt": "a", "answer": "1", "metadata": {"w": NaN}}')

    assert _error(path) == f"{path}: line 1: invalid JSON (NaN is not valid JSON)"


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ('{"prompt": "", "answer": "1"}', "prompt", "must not be empty"),
        ('{"prompt": ["a"], "answer": "1"}', "prompt", "must be a string"),
        ('{"prompt": "a", "answer": true}', "answer", "must be a string"),
        ('{"prompt": "a", "answer": "1", "metadata": "x"}', "metadata", "must be a JSON object"),
        ('{"prompt": "a", "answer": "1", "label": "x"}', "label", "unknown field"),
        ('{"id": "has space", "prompt": "a", "answer": "1"}', "id", "'has space' is not a valid member name"),
    ],
)
def test_malformed_rows_name_the_field(tmp_path: Path, line: str, field: str, message: str) -> None:
    path = _write(tmp_path / "q.jsonl", line)

    assert _error(path).startswith(f"{path}: line 1: {field}: {message}")


def test_row_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.jsonl", '["prompt", "answer"]')

    assert _error(path) == f"{path}: line 1: a row must be a JSON object"


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "q.jsonl",
        '{"id": "q0002", "prompt": "a", "answer": "1"}',
        '{"prompt": "b", "answer": "2"}',
    )

    assert _error(path) == f"{path}: line 2: id: duplicate id 'q0002' (first used on line 1)"


def test_empty_file_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.jsonl", "", "")

    assert _error(path) == f"{path}: no rows (the file is empty)"


def test_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_bytes(b'{"prompt": "caf\xe9", "answer": "1"}\n')

    assert _error(path).startswith(f"{path}: not valid UTF-8")


def test_row_digest_is_canonical_json_of_the_row(tmp_path: Path) -> None:
    spaced = _write(tmp_path / "a.jsonl", '{ "answer" : "1",  "prompt": "é", "id": "x" }')
    compact = _write(tmp_path / "b.jsonl", '{"id":"x","prompt":"\\u00e9","answer":"1"}')
    row = load_jsonl(spaced)[0]
    canonical = json.dumps(
        {"answer": "1", "id": "x", "metadata": {}, "prompt": "é"}, separators=(",", ":"), ensure_ascii=False
    )

    assert row_digest(row) == row_digest(load_jsonl(compact)[0])
    assert row_digest(row) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def test_changing_answer_or_id_changes_the_row_digest() -> None:
    base = ChatRow(id="a", prompt="p", answer="1")

    assert row_digest(base) != row_digest(base.model_copy(update={"answer": "2"}))
    assert row_digest(base) != row_digest(base.model_copy(update={"id": "b"}))


def test_jsonl_digest_maps_member_names_to_digests_in_row_order(tmp_path: Path) -> None:
    rows = load_jsonl(
        _write(
            tmp_path / "q.jsonl",
            '{"id": "z", "prompt": "a", "answer": "1"}',
            '{"prompt": "b", "answer": "2"}',
        )
    )

    digests = jsonl_digest(rows)

    assert list(digests) == ["z", "q0002"]
    assert digests["z"] == row_digest(rows[0])


def test_scorer_names_are_the_four_built_ins() -> None:
    assert SCORERS == ("exact", "includes", "regex", "numeric")


def test_unknown_scorer_is_refused() -> None:
    with pytest.raises(TaskFormatError) as caught:
        validate_scorer("fuzzy", [], source="sets/q.jsonl")

    assert str(caught.value) == (
        "sets/q.jsonl: scorer: unknown scorer 'fuzzy' (known: exact, includes, regex, numeric)"
    )


def test_regex_answers_must_compile() -> None:
    rows = [ChatRow(id="ok", prompt="p", answer=r"^\d+$"), ChatRow(id="bad", prompt="p", answer="(unclosed")]

    with pytest.raises(TaskFormatError) as caught:
        validate_scorer("regex", rows, source="sets/q.jsonl")

    assert str(caught.value) == (
        "sets/q.jsonl: row bad: answer: is not a valid regular expression (missing ) at position 9) "
        "(scorer 'regex')"
    )


def test_numeric_answers_must_be_finite_numbers() -> None:
    good = [ChatRow(id="a", prompt="p", answer=" 1,234.5 "), ChatRow(id="b", prompt="p", answer="-3e2")]
    assert validate_scorer("numeric", good) == "numeric"

    for answer in ("twelve", "nan", "inf", ""):
        with pytest.raises(TaskFormatError, match="is not a finite number"):
            validate_scorer("numeric", [ChatRow(id="c", prompt="p", answer=answer)])


def test_empty_answer_is_refused_where_it_would_match_everything() -> None:
    empty = [ChatRow(id="e", prompt="p", answer="")]

    assert validate_scorer("exact", empty) == "exact"
    for scorer in ("includes", "regex"):
        with pytest.raises(TaskFormatError, match="would match every response"):
            validate_scorer(scorer, empty)


def test_parse_numeric_reads_common_number_spellings() -> None:
    assert parse_numeric("$1,000") == 1000.0
    assert parse_numeric(" 0.5 ") == 0.5
    assert parse_numeric("1/2") is None
    assert parse_numeric("Infinity") is None
