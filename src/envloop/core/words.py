"""Words every surface prints alike, free of any import: a CLI command that loads nothing else can
still say "1 trial"."""


def plural(count: int, singular: str, several: str | None = None) -> str:
    """`1 profile`, `2 profiles`, `0 profiles`: a count with its noun in the right number."""
    return f"{count} {singular if count == 1 else several or singular + 's'}"
