"""The `ENVLOOP_*` variables envloop itself sets inside a trial, as the reference page lists them.

They share the settings' prefix but are never read from the operator's environment (the settings
model ignores them), so they are listed here rather than in envloop/settings.py; the docs' check
that every `ENVLOOP_*` name in the code is either a setting or one of these reads both.
"""

SET_FOR_TRIALS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("ENVLOOP_JOB_ID", "ENVLOOP_TRIAL_ID", "ENVLOOP_TASK", "ENVLOOP_ATTEMPT"),
        "the job, the attempt, the task's name and which attempt (1-based)",
    ),
    (
        ("ENVLOOP_APP_DIR", "ENVLOOP_LOGS_DIR", "ENVLOOP_TESTS_DIR", "ENVLOOP_SOLUTION_DIR"),
        "the task's workdir, `/logs`, `/tests`, `/solution` as the trial sees them",
    ),
    (
        ("ENVLOOP_INSTRUCTION_FILE", "ENVLOOP_INSTRUCTION"),
        "the agent's instruction (the text itself only when it is short)",
    ),
    (("ENVLOOP_MAX_STEPS",), "the agent's step limit, when there is one"),
    (
        ("ENVLOOP_MCP_CONFIG",),
        "for `claude-code`: the MCP servers of the task's `[[environment.mcp_servers]]`",
    ),
    (("ENVLOOP_AGENT_PATH",), "for an agent CLI: where its installed copy is, put first on its `PATH`"),
    (
        (
            "ENVLOOP_CODEX_CONFIG",
            "ENVLOOP_QWEN_SETTINGS",
            "ENVLOOP_GEMINI_SETTINGS",
            "ENVLOOP_MINI_CONFIG",
            "ENVLOOP_MINI_TRAJECTORY",
            "ENVLOOP_AIDER_SETTINGS",
            "ENVLOOP_AIDER_MODEL",
            "ENVLOOP_AIDER_BASE",
            "ENVLOOP_AIDER_EDIT_FORMAT",
            "ENVLOOP_AIDER_EFFORT",
            "ENVLOOP_AIDER_LOGS",
        ),
        "for the agent CLIs: the configuration envloop writes for the CLI and where it keeps its record "
        "([Agent CLIs](../guides/agents.md))",
    ),
    (("ENVLOOP_RUN_ID", "ENVLOOP_EXEC_ID"), "markers by which envloop finds a run's processes to stop them"),
)
"""The variables envloop sets for every command of a trial (never read from the operator's
environment, so not settings): each row's names and what they hold."""
