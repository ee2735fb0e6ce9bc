"""Which instances are made and removed on the event loop rather than on a thread.

A thread is not free on a busy worker: each of its file calls lets go of the interpreter lock and
takes it back, so a thread making an instance (a few hundred small calls) while the event loop runs
passes the lock back and forth with the loop, each pass a futex call and a context switch. Made
and removed inline, a trivial bubblewrap trial took 12 to 13 % less wall and 12 to 15 % less of the
machine's CPU (BENCHMARKS.md). What could take long still goes to a thread, so the loop keeps
serving the other trials: copying a large build context or test tree in, freeing a file system
that holds much.
"""

from collections.abc import Iterable
from pathlib import Path

from envloop.environments.keeping import plain_trees
from envloop.environments.local import quota

INLINE_COPY_ENTRIES = 64
"""At most this many entries below the task's build context and test layers for an instance made
inline; a trivial task has three or four."""
INLINE_COPY_BYTES = 1 << 20
"""At most this many bytes in their files (copying a megabyte takes well under a millisecond)."""
INLINE_FREE_BYTES = 4 << 20
"""At most this much used on an instance's own file system for it to be unmounted inline: the
kernel frees its pages in the unmounting call (here 0.1 ms empty, 0.5 ms holding 4 MiB, 1 ms
holding 16 MiB, 14 ms holding 256 MiB)."""


def copies_little(roots: Iterable[Path]) -> bool:
    """Whether what an instance copies in at its creation, all below `roots` (the task's build
    context, its test layers; those that are not there copy nothing), is a plain tree of at most
    INLINE_COPY_ENTRIES entries and INLINE_COPY_BYTES in all (`plain_trees`). Anything else (a
    link, an unreadable or a deep directory) says no: the thread then meets it as before."""
    present = [root for root in roots if root.is_dir()]
    return plain_trees(present, INLINE_COPY_ENTRIES, INLINE_COPY_BYTES) is True


def frees_little(root: Path) -> bool:
    """Whether the instance file system mounted at `root` holds at most INLINE_FREE_BYTES."""
    used = quota.used_bytes(root)
    return used is not None and used <= INLINE_FREE_BYTES
