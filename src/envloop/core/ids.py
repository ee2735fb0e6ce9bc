"""Identifiers that sort by creation time, so listings and queues order naturally."""

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def _base32(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """`prefix_` + 10 chars of milliseconds + 12 random chars (a ULID-like, lowercase)."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(8), "big")
    return f"{prefix}_{_base32(millis, 10)}{_base32(rand, 12)}"
