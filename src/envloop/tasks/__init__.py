"""Task formats: Harbor task directories and JSONL rows, their digests, and safe archive handling.

Import the submodule that holds what you need (`envloop.tasks.archive`, `.harbor`, `.jsonl`, …):
this package imports none of them, so reading a stored result does not load the task parsers,
scorers and their regular-expression engine.
"""
