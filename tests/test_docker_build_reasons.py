"""A failed image build is named in one line a user can act on: the failing command's start and
the first line of its output that says why, as BuildKit's plain progress writes them."""

from envloop.environments.docker.builder import failure_reason

NVM = (
    "curl -o- https://raw.githubusercontent.com/nvm-sh/nvm/v0.40.1/install.sh | bash"
    '     && . "$NVM_DIR/nvm.sh"'
    "     && nvm install 22     && npm install -g --ignore-scripts --no-audit openclaw@latest"
)
LOG = f"""\
#8 [2/5] RUN apt-get update
#8 CACHED

#9 [3/5] RUN {NVM}
#9 sha256:485270782da26c3f257241daf60f6b79ff7565402e5b0312634bd97aaf05ecb3
#9 0.326   % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current
#9 0.329                                  Dload  Upload   Total   Spent    Left  Speed
#9 0.329 \r  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0curl: (6) \
Could not resolve host: raw.githubusercontent.com
#9 0.343 /bin/sh: 1: .: cannot open /root/.nvm/nvm.sh: No such file
#9 ERROR: executor failed running [/bin/sh -c {NVM}]: exit code: 2
------
 > [3/5] RUN {NVM}
------
executor failed running [/bin/sh -c {NVM}]: exit code: 2
"""


def test_a_failed_run_names_its_command_start_exit_code_and_first_cause() -> None:
    assert failure_reason(LOG) == (
        "RUN curl -o- https://raw.githubusercontent.com/nvm-sh/nvm/v0.40.1/install.sh | bash … "
        "failed: exit code: 2 (curl: (6) Could not resolve host: raw.githubusercontent.com)"
    )


def test_a_short_command_is_shown_whole_and_a_silent_failure_has_no_cause() -> None:
    log = "#5 [2/2] RUN false\n#5 ERROR: executor failed running [/bin/sh -c false]: exit code: 1\n"
    assert failure_reason(log) == "RUN false failed: exit code: 1"


def test_other_failures_keep_the_builders_own_last_error_line() -> None:
    log = "#1 load build definition\nERROR: failed to solve: base image not found\n"
    assert failure_reason(log) == "ERROR: failed to solve: base image not found"
