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
at the first event past a limit rather than after seconds, or hours, of parsing. TOML has no aliases and
JSON none either; both are read within a size (a JSONL dataset row by row), and their nesting is
bounded where they are loaded (`core.nesting`, the RecursionError a parser raises on depth).

Every refusal is one line naming the file and the limit: `el dataset push` exits 2 with it, and the
server answers the same upload with the same line.
"""

from pathlib import Path

import yaml

from envloop.core.nesting import MAX_DEPTH

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
            raise ParseLimitError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
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
                    raise ParseLimitError(f"{where}: nested more than {MAX_DEPTH} levels deep")
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
            raise ParseLimitError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
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
            raise ParseLimitError(f"{where}: nested more than {MAX_DEPTH} levels deep")
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
