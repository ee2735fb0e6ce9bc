"""Limits that hold: every instance gets its own memory limit from a reused cgroup, whatever the
last instance had, and a limit the host's cgroup refuses fails the trial instead of running it
without that limit."""

from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.environments.local.limits import InstanceCgroups, LimitNotSetError, Limits
from tests.conftest import El, make_task, write_profile

MB = 1024 * 1024


def _memory_dir(groups: InstanceCgroups) -> Path:
    return groups.dirs[groups.controllers.index("memory")]


def _has_memsw_cgroup() -> bool:
    probe = InstanceCgroups("envloop-probe", Limits())
    ok = "memory" in probe.controllers and (_memory_dir(probe) / "memory.memsw.limit_in_bytes").exists()
    probe.remove()
    return ok


needs_memsw = pytest.mark.skipif(
    not _has_memsw_cgroup(), reason="no writable cgroup v1 memory controller with swap accounting here"
)


@needs_memsw
def test_a_reused_memory_cgroup_takes_a_larger_limit_than_its_last_instance_had() -> None:
    seen = []
    for memory_mb in (512, 4096, 512, 4096):
        groups = InstanceCgroups(new_id("trl"), Limits(memory_mb=memory_mb))
        directory = _memory_dir(groups)
        seen.append(
            (
                directory,
                int((directory / "memory.limit_in_bytes").read_text()) // MB,
                int((directory / "memory.memsw.limit_in_bytes").read_text()) // MB,
            )
        )
        groups.remove()
    assert [(memory, swap) for _, memory, swap in seen] == [
        (512, 512),
        (4096, 4096),
        (512, 512),
        (4096, 4096),
    ]
    assert len({directory for directory, _, _ in seen}) == 1  # the same pooled group every time


@needs_memsw
def test_a_limit_the_cgroup_refuses_fails_the_instance_and_leaves_no_group() -> None:
    # The kernel's smallest CPU quota is 1 ms per 100 ms period: 0.001 CPUs cannot be set.
    with pytest.raises(LimitNotSetError, match=r"cpu limit of 0\.001 could not be set"):
        InstanceCgroups(new_id("trl"), Limits(cpus=0.001))
    after = InstanceCgroups(new_id("trl"), Limits())
    assert after.controllers  # the host still hands out groups; the failed one left nothing behind
    after.remove()


@needs_memsw
@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_job_mixing_small_and_large_memory_tasks_runs_every_trial_under_its_own_limit(
    el: El, tmp_path: Path, store_url: str
) -> None:
    src = tmp_path / "tasks"
    sizes = {"small-a": 512, "large-a": 4096, "small-b": 512, "large-b": 4096}
    for name, memory_mb in sizes.items():
        make_task(src, name, toml=f"[environment]\nmemory_mb = {memory_mb}\n")
    el.ok("dataset", "push", str(src), "--name", "mixed")
    # 700 MB fits a 4096 MB task and not a 512 MB one: the limit is the kernel's, not a note.
    grab = 'python3 -c "b = bytearray(700 * 1024 * 1024)" && touch "${ENVLOOP_APP_DIR:-/app}/done"'
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "command", "AGENT_COMMAND": grab})
    el.ok("profile", "create", "team/grab", "1", "--file", str(profile))
    job = el(
        "job",
        "submit",
        "--dataset",
        "mixed@1",
        "--profile",
        "team/grab@1",
        "--attempts",
        "3",
        "--wait",
        "--json",
        timeout=600,
    ).json()
    trials = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert len(trials) == 12
    for trial in trials:
        memory_mb = sizes[trial["task"]]
        assert f"memory cgroup ({memory_mb} MB)" in trial["sandbox_note"], trial
        assert not [w for w in trial["warnings"] if w.startswith("memory limit not enforced")], trial
        assert trial["reward"] == (1.0 if memory_mb == 4096 else 0.0), trial
