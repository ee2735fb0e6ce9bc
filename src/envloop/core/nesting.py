"""How deeply a parsed JSON or TOML value nests, measured without recursion.

Third parties write the documents envloop parses (task files, JSONL rows, verifier output). A
document nested thousands of levels deep is small on disk yet breaks every recursive step after
parsing (validation, serialization, display), so surfaces bound the depth where they accept one.
"""

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
