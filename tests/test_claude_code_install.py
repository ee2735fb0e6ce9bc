"""The install script of the `claude-code` agent, run by bash against a stand-in `npm` that behaves
as the real one does when it cannot fetch an optional dependency: it succeeds, and the installed
CLI cannot start."""

import subprocess
from pathlib import Path

from envloop.agents.claude_code import INSTALL_SCRIPT

# Each call installs a `claude` into --prefix; the first one (no marker yet) is broken, as when
# npm left out the native binary, later ones work. Every call is counted in calls.txt.
FAKE_NPM = r"""#!/bin/bash
if [ "$1" = config ]; then echo /nonexistent/npmrc; exit 0; fi
state="$FAKE_NPM_STATE"
echo call >> "$state/calls.txt"
prefix=""
while [ $# -gt 0 ]; do
  if [ "$1" = --prefix ]; then prefix="$2"; fi
  shift
done
mkdir -p "$prefix/bin"
if [ -e "$state/broken-once" ] && [ ! -e "$state/broke" ]; then
  touch "$state/broke"
  printf '#!/bin/bash\necho "Error: claude native binary not installed." >&2\nexit 1\n' > "$prefix/bin/claude"
elif [ -e "$state/always-broken" ]; then
  printf '#!/bin/bash\necho "Error: claude native binary not installed." >&2\nexit 1\n' > "$prefix/bin/claude"
else
  printf '#!/bin/bash\necho "$WANT (Claude Code)"\n' > "$prefix/bin/claude"
fi
chmod +x "$prefix/bin/claude"
echo "added 1 package in 1s"
"""


def _install(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], int]:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    (bin_dir / "npm").write_text(FAKE_NPM)
    (bin_dir / "npm").chmod(0o755)
    for flag in flags:
        (state / flag).touch()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "FAKE_NPM_STATE": str(state),
        "WANT": "2.1.285",
        "CLAUDE_CODE_VERSION": "2.1.285",
        "CLAUDE_CODE_PREFIX": str(tmp_path / "prefix"),
        "CLAUDE_CODE_PACKAGE": "@anthropic-ai/claude-code",
    }
    done = subprocess.run(
        ["bash", "-c", INSTALL_SCRIPT], env=env, capture_output=True, text=True, check=False, cwd=tmp_path
    )
    calls = len((state / "calls.txt").read_text().splitlines())
    return done, calls


def test_a_cli_that_npm_installed_without_its_native_binary_is_installed_again(tmp_path: Path) -> None:
    done, calls = _install(tmp_path, "broken-once")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{tmp_path}/prefix/bin/claude"
    assert calls == 2
    assert "installing it again" in done.stderr


def test_a_good_install_is_made_once(tmp_path: Path) -> None:
    done, calls = _install(tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls == 1 and "again" not in done.stderr


def test_a_cli_that_never_starts_fails_the_install_with_its_own_words(tmp_path: Path) -> None:
    done, calls = _install(tmp_path, "always-broken")
    assert done.returncode != 0
    assert calls == 2
    assert done.stderr.strip().splitlines()[-1] == "Error: claude native binary not installed."
    assert (tmp_path / "prefix" / "bin" / "claude").exists()
