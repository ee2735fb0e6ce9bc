"""Walking a directory tree an agent made, in memory that does not grow with what it made.

A walk that keeps a list of the directories still to enter holds one path for every directory
it has seen and not yet entered: an agent that makes a million directories side by side
(`seq 1 1000000 | xargs mkdir`) puts a million paths in the worker's memory. This walk is depth
first and holds only the listings it is inside, one open directory per level, each read an
entry at a time: its memory grows with the tree's depth, never with its breadth. Where the tree
is the agent's, the depth is bounded too (`max_depth`): directories below it are not entered, and
counted, so a nest of ten thousand directories neither holds ten thousand open listings nor
passes unnoticed.
"""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    Listing = os._ScandirIterator[str]

MAX_AGENT_TREE_DEPTH = 64
"""How many levels of a tree made in a sandbox are walked when it is copied out; what lies deeper
is counted, not kept. No real log or artifact directory comes near it."""


class TreeWalk:
    """Every entry below `root`, depth first, never through a link; a directory comes before what
    it holds. A directory more than `max_depth` levels below `root` is yielded but not entered
    (`not_entered` counts them). A directory that cannot be listed raises OSError, or with
    `skip_unreadable` is passed over."""

    def __init__(self, root: Path, max_depth: int | None = None, *, skip_unreadable: bool = False) -> None:
        self.root = root
        self.max_depth = max_depth
        self.skip_unreadable = skip_unreadable
        self.not_entered = 0

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        listings: list[Listing] = []
        try:
            self._enter(listings, self.root)
            while listings:
                entry = next(listings[-1], None)
                if entry is None:
                    listings.pop().close()
                    continue
                yield entry
                if entry.is_dir(follow_symlinks=False):
                    if self.max_depth is not None and len(listings) >= self.max_depth:
                        self.not_entered += 1
                    else:
                        self._enter(listings, entry.path)
        finally:
            for listing in listings:
                listing.close()

    def _enter(self, listings: "list[Listing]", path: str | Path) -> None:
        try:
            listings.append(os.scandir(path))
        except OSError:
            if not self.skip_unreadable:
                raise
