"""The `el` command line: a surface that only presents. What a command does is an operation of a
client (`backend`: the embedded store's, or a server's); the command reads options and prints.

A command lives in the module named after it, so the name a user types finds the code: a group's
commands in the group's module (`el job submit` in `job.py`), a command another module adds to a
group in a module of its own name (`el job compare` in `compare.py`, `el dataset check` in
`check.py`), a top-level command in its own (`plan.py`, `worker.py`, `serve.py`); `main.ENTRIES`
maps them. The other modules are pieces the commands share (`output`, `render`, `layout`,
`progress`, `options`, `exits`) or split off (`compare_tasks`, `diagnosis_view`).
"""
