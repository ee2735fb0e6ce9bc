"""Small text helpers the generated reference pages share."""


def cell(text: object) -> str:
    """Text as one Markdown table cell: a single line, with the column separator escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")
