"""Task files parsed with limits: a file a task author wrote is read only up to a size, and a YAML
document only up to a number of nodes counted with every alias expanded.

A YAML alias is a reference: ten lines of anchors (`b: [*a, *a, *a, …]`, each level ten times the
last) make a document of a billion items that PyYAML builds in a blink, and that the first reader
which walks it (pydantic, `str()`, a digest) expands until the process runs out of memory. So the
composed node graph is measured before anything is built from it: each node counted once per way it
is reached, in time linear in the distinct nodes (a memo per node), refused past
`MAX_YAML_NODES`, past `MAX_DEPTH` levels or when an alias contains itself. Before the graph is
built, the parser's events are counted as they come (libyaml's parser where PyYAML has it), so a
megabyte of plain items, or of `[` (PyYAML's own scanner is quadratic in flow nesting), is refused
at the first event past a limit rather than after seconds, or hours, of parsing. TOML has no aliases,
but `tomllib` walks a dotted key or a table header from its first part for each of its parts, so a
200 KB key of 100,000 parts (`x.a.a.a… = 1`, `[a.a.a…]`) took it minutes and gigabytes; a task.toml
is therefore scanned first, in one pass of a regular expression that skips strings and comments,
and refused at the first key of more than `MAX_DEPTH` parts, bracket nested deeper, or item past
`MAX_TOML_ITEMS`; what it parses to is then held to `MAX_DEPTH` levels in all. JSON has no aliases
either; it is read within a size (a JSONL dataset row by row), and its nesting is bounded where it
is loaded (`core.nesting`, the RecursionError a parser raises on depth).

Every refusal is one line naming the file and the limit: `el dataset push` exits 2 with it, and the
server answers the same upload with the same line.
"""

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import yaml

from envloop.core.nesting import MAX_DEPTH, TOO_DEEP, NestedTooDeepError, within_depth

MAX_CONFIG_BYTES = 1 << 20
"""The largest task.toml or compose file: real ones are a few kilobytes."""
MAX_JSONL_ROW_BYTES = 4 << 20
"""The longest JSONL row: a prompt of at most 1 MiB (an instruction's limit) with its answer and
metadata."""
MAX_YAML_NODES = 100_000
"""The most nodes a YAML document may hold with its aliases expanded: real compose files hold a few
hundred."""
MAX_YAML_WRITTEN_NODES = 20_000
"""The most nodes a YAML document may write out (aliases counted once): each is an object the
parser makes before anything else can be checked, and 100,000 of them took a second on a busy
machine."""
MAX_TOML_ITEMS = 20_000
"""The most keys, values, separators and brackets a task.toml may hold: real ones hold a hundred,
and a megabyte of array items took `tomllib` two seconds on a busy machine."""


class ParseLimitError(ValueError):
    """A task file over a parsing limit; the message is one line naming the file and the limit."""


def read_bounded(path: Path, where: str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
    """The file's bytes; ParseLimitError when it holds more than `max_bytes` (nothing past them is
    read)."""
    with path.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ParseLimitError(f"{where}: larger than the {max_bytes:,} bytes a task's file may have here")
    return data


_Loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML has it (its wheels do): PyYAML's own scans a megabyte in tens of
seconds on a busy machine, libyaml in a fraction of one."""


def _too_deep(where: str) -> ParseLimitError:
    return ParseLimitError(f"{where}: {TOO_DEEP}")


def load_yaml(text: str, where: str, *, aliases: bool = True) -> object:
    """The document's data, as `yaml.safe_load` gives it, once its node graph is within the
    limits (and, without `aliases`, it has none); ParseLimitError otherwise, yaml.YAMLError when
    it is not YAML."""
    _check_events(text, where, aliases)
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise _too_deep(where) from None
        if node is None:
            return None
        _check_expansion(node, where)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_events(text: str, where: str, aliases: bool) -> None:
    """Refuse a document that writes out more than `MAX_YAML_WRITTEN_NODES` nodes or nests deeper than
    `MAX_DEPTH`, from the parser's events, stopping at the first past a limit: building the node
    graph of a megabyte of items costs seconds before any limit on it could be checked."""
    loader = _Loader(text)
    nodes = depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(where)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                continue
            elif not isinstance(event, yaml.NodeEvent):
                continue
            elif not aliases and isinstance(event, yaml.AliasEvent):
                raise ParseLimitError(f"{where}: YAML aliases are not accepted")
            nodes += 1
            if nodes > MAX_YAML_WRITTEN_NODES:
                raise ParseLimitError(f"{where}: holds more than {MAX_YAML_WRITTEN_NODES:,} items")
    except yaml.MarkedYAMLError as error:
        # libyaml's scanner reads ahead of the events and stops deep flow nesting itself.
        if "nesting depth" in str(error.problem):
            raise _too_deep(where) from None
        raise
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, where: str) -> None:
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if depth > MAX_DEPTH:
            raise _too_deep(where)
        if id(node) in open_nodes:
            raise ParseLimitError(f"{where}: an alias refers to a node that contains it")
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(key, depth + 1) + size(value, depth + 1) for key, value in node.value)
        open_nodes.discard(id(node))
        if total > MAX_YAML_NODES:
            raise ParseLimitError(
                f"{where}: expands to more than {MAX_YAML_NODES:,} items through its aliases"
            )
        sizes[id(node)] = total
        return total

    size(root, 0)


_TOML_NEXT = re.compile(r"[\"'#.\[\]{}=,]")
"""What matters to a TOML document's shape: strings and comments (whose dots and brackets are
text) and the punctuation of keys, tables, arrays and inline tables. The search skips the rest
(bare keys, numbers, spaces) without a step of Python."""
_TOML_COMMENTS = re.compile(r"#[^\n]*+(?:\s*+#[^\n]*+)*+")
_TOML_STRING_REST = {
    '"""': re.compile(r'(?:[^"\\]++|\\[\s\S]|"(?!""))*+"""(?:""?)?'),
    "'''": re.compile(r"(?:[^']++|'(?!''))*+'''(?:''?)?"),
    '"': re.compile(r'(?:[^"\\\n]++|\\.)*+"'),
    "'": re.compile(r"[^'\n]*+'"),
}
"""The rest of each kind of string after its opening quotes, to its closing ones; possessive, so
that no text is read twice."""


def _toml_tokens(text: str) -> Iterator[str]:
    """The document's punctuation, and `"` for each whole string; it ends at a string that does
    not (`tomllib` then says where the document is wrong), so each character is read once."""
    position = 0
    while (found := _TOML_NEXT.search(text, position)) is not None:
        char, start = found.group(), found.start()
        if char == "#":
            comments = _TOML_COMMENTS.match(text, start)
            position = comments.end() if comments is not None else start + 1
            continue
        if char in "\"'":
            opener = char * 3 if text.startswith(char * 3, start) else char
            rest = _TOML_STRING_REST[opener].match(text, start + len(opener))
            if rest is None:
                return
            position = rest.end()
            yield '"'
            continue
        position = start + 1
        yield char


def load_toml(text: str, where: str) -> dict[str, object]:
    """The document's data, as `tomllib.loads` gives it, once its shape is within the limits;
    ParseLimitError otherwise, tomllib.TOMLDecodeError when it is not TOML."""
    _check_toml_tokens(text, where)
    try:
        return cast(dict[str, object], within_depth(tomllib.loads, text))
    except NestedTooDeepError as exc:
        raise ParseLimitError(f"{where}: {exc}") from None


def _check_toml_tokens(text: str, where: str) -> None:
    """Refuse a key of more than `MAX_DEPTH` parts, brackets nested more than `MAX_DEPTH` deep
    and more than `MAX_TOML_ITEMS` tokens, at the first token past a limit. The dots of a key are
    counted since the last `=`, `,` or bracket, across quoted parts (`"a"."b"`): a value has at
    most one of its own (`1.5`), so a count past the limit is a key that long."""
    dots = depth = items = 0
    for token in _toml_tokens(text):
        if token == ".":
            dots += 1
            if dots > MAX_DEPTH:
                raise ParseLimitError(f"{where}: a key of more than {MAX_DEPTH} parts")
            continue
        items += 1
        if items > MAX_TOML_ITEMS:
            raise ParseLimitError(f"{where}: holds more than {MAX_TOML_ITEMS:,} items")
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(where)
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
        elif token not in ("=", ","):
            continue  # a string: a quoted part of a key is one of its parts
        dots = 0
