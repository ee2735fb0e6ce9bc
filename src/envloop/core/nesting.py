"""How deeply a parsed JSON or TOML value nests, measured without recursion.

Third parties write the documents envloop parses (task files, JSONL rows, verifier output). A
document nested thousands of levels deep is small on disk yet breaks every recursive step after
parsing (validation, serialization, display), so surfaces bound the depth where they accept one.
"""

import json
from collections.abc import Callable

MAX_DEPTH = 32
"""The deepest nesting accepted in a third party's document: far beyond any real use."""


def deeper_than(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and mappings inside `value` nest more than `limit` levels (a scalar is 0)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"
"""What every refusal of a document nested too deep says (after naming the document)."""


class NestedTooDeepError(ValueError):
    """A document nested more than `MAX_DEPTH` levels; the message says so in a few words."""


def within_depth(parse: Callable[[str], object], text: str) -> object:
    """What `parse` makes of `text`, refused as NestedTooDeepError when it nests more than
    `MAX_DEPTH` levels: past about a thousand a parser itself raises RecursionError, and below that
    the value reaches the recursive steps after parsing. The parser's own errors pass through."""
    try:
        value = parse(text)
    except RecursionError:
        raise NestedTooDeepError(TOO_DEEP) from None
    if deeper_than(value):
        raise NestedTooDeepError(TOO_DEEP)
    return value


def load_json(text: str) -> object:
    """`json.loads` within `MAX_DEPTH` levels (see `within_depth`); json.JSONDecodeError still means
    the text is not JSON."""
    return within_depth(json.loads, text)
