"""`el model serve`: local models under named aliases (`NAME/base`, `NAME/sft`, …) over the Chat
Completions and Messages protocols, for before/after evaluations that need no network.

The parts are imported from their modules (`aliases`, `engine`, `app`): this package imports
nothing itself, so reading an alias default (as `el model --help` does) does not load the web stack.
"""
