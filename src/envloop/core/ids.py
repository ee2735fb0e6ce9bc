"""Identifiers that sort by creation time, so listings and queues order naturally."""

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_PAIRS = [high + low for high in _ALPHABET for low in _ALPHABET]
"""Every two-character string, indexed by the 10 bits it encodes: half the divisions of a per-char loop."""
_RANDOM_BYTES = 8


def _base32(value: int, width: int) -> str:
    """`value` in `width` characters (`width` even; the ids use 10 and 12)."""
    pairs = []
    for _ in range(width // 2):
        value, rem = divmod(value, 1024)
        pairs.append(_PAIRS[rem])
    return "".join(reversed(pairs))


def _millis() -> str:
    return _base32(time.time_ns() // 1_000_000, 10)


def new_id(prefix: str) -> str:
    """`prefix_` + 10 chars of milliseconds + 12 random chars (a ULID-like, lowercase)."""
    rand = int.from_bytes(os.urandom(_RANDOM_BYTES), "big")
    return f"{prefix}_{_millis()}{_base32(rand, 12)}"


def new_ids(prefix: str, count: int) -> list[str]:
    """`count` ids made at once (a job's trials): one clock reading and one read of random bytes,
    as `new_id` would give for ids made within the same millisecond."""
    head = f"{prefix}_{_millis()}"
    pool = os.urandom(_RANDOM_BYTES * count)
    return [
        head + _base32(int.from_bytes(pool[at : at + _RANDOM_BYTES], "big"), 12)
        for at in range(0, len(pool), _RANDOM_BYTES)
    ]
