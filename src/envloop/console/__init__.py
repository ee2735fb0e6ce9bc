"""The web console `el serve` shows at `/`: jobs, metrics, task grid, trials and their traces, the
project leaderboard, and share links, rendered on the server from the service layer."""

from envloop.console.install import api_and_console, install_console

__all__ = ["api_and_console", "install_console"]
