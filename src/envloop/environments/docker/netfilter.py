"""Changing the host's netfilter rules (iptables, ip6tables, ebtables), which every worker process
of this host shares: what firewall.py and bridge_rules.py are made of.

Another worker process may change the same chains at any moment, so nothing here flushes: a rule is
added once its check says it is missing, a chain made unless it is there, and a rule a worker makes
for its own shared bridges carries its identity (`owned`), so a killed worker's are swept by the next
(bridge_rules.sweep_rules). iptables takes a lock (`-w`); ebtables has none, so its changes are
tried again when they collide.

Callers name these through the module (`netfilter.iptables(...)`), so one replacement times them all
(bench/docker_calls.py).
"""

import asyncio

from envloop.environments.base import EnvironmentSetupError
from envloop.liveness import process_identity

OWNER_MARK = "envloop "
"""How the comment of an owned rule begins; the worker's identity follows."""
_EBTABLES_ATTEMPTS = 6
_EBTABLES_FINAL = (
    b"does a matching rule exist",
    b"No chain/target/match by that name",
    b"Chain already exists",
)
"""ebtables' answers that a second try would not change (a rule or chain missing, or one there
already), unlike a collision with another change."""


class FirewallError(EnvironmentSetupError):
    """The host cannot be kept away from a trial's network here; the reason says why."""


async def iptables(*args: str, check: bool = True) -> bool:
    return await _xtables("iptables", args, check)


async def ip6tables(*args: str, check: bool = True) -> bool:
    return await _xtables("ip6tables", args, check)


async def _xtables(binary: str, args: tuple[str, ...], check: bool) -> bool:
    proc = await asyncio.create_subprocess_exec(
        binary,
        "-w",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0 and check:
        raise FirewallError(f"{binary} {' '.join(args)}: {err.decode(errors='replace').strip()[:200]}")
    return proc.returncode == 0


async def listed(chain: str) -> list[str]:
    """The rules of an iptables chain as `iptables -S` writes them (none when it cannot be read)."""
    proc = await asyncio.create_subprocess_exec(
        "iptables", "-w", "-S", chain, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await proc.communicate()
    return out.decode(errors="replace").splitlines()


async def ensure_chain(name: str) -> None:
    """Another worker process of this host may create the chain between the look and the creation:
    only a chain still missing after a failed creation is a failure."""
    if await iptables("-n", "-L", name, check=False) or await iptables("-N", name, check=False):
        return
    if not await iptables("-n", "-L", name, check=False):
        await iptables("-N", name)  # fails again, with iptables' reason


async def ensure_jump(chain: str, *rule: str) -> None:
    """`rule` first in `chain`, unless it is there already."""
    if not await iptables("-C", chain, *rule, check=False):
        await iptables("-I", chain, "1", *rule)


async def ensure_rule(chain: str, *rule: str) -> None:
    """`rule` last in `chain`, unless it is there already."""
    if not await iptables("-C", chain, *rule, check=False):
        await iptables("-A", chain, *rule)


async def ebtables(*args: str, check: bool = True) -> tuple[bool, str]:
    """ebtables has no lock (`iptables -w`): two changes at once, in this process or another, can
    fail one of them with an nftables error, so a failed change is tried again a few times."""
    for attempt in range(_EBTABLES_ATTEMPTS):
        proc = await asyncio.create_subprocess_exec(
            "ebtables", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        final = any(reason in err for reason in _EBTABLES_FINAL)
        if proc.returncode == 0 or "-L" in args[:3] or final or attempt == _EBTABLES_ATTEMPTS - 1:
            break
        await asyncio.sleep(0.02 * (attempt + 1))
    if proc.returncode != 0 and check:
        raise FirewallError(f"ebtables {' '.join(args)}: {err.decode(errors='replace').strip()[:200]}")
    return proc.returncode == 0, out.decode(errors="replace")


async def ebtables_batch(changes: dict[str, tuple[str, ...]], attempts: int = _EBTABLES_ATTEMPTS) -> bool:
    """Make one change in each of several tables (`filter`, `nat`) in one ebtables process, one
    transaction: two ebtables at once, each taking its own, collide and wait on each other for
    twice the time. False when it could not (a change to delete that is not there fails them all)."""
    text = "".join(f"*{table}\n{' '.join(change)}\n" for table, change in changes.items()) + "COMMIT\n"
    for attempt in range(attempts):
        try:
            proc = await asyncio.create_subprocess_exec(
                "ebtables-restore",
                "--noflush",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError:
            return False
        await proc.communicate(text.encode())
        if proc.returncode == 0:
            return True
        await asyncio.sleep(0.02 * (attempt + 1))
    return False


async def ensure_eb_chain(
    table: tuple[str, ...], name: str, jumps: tuple[str, ...], match: tuple[str, ...]
) -> None:
    """The ebtables chain `name`, ending in RETURN, and a jump to it first in each of `jumps` for
    frames of `match`; added when missing (ebtables has no check of a rule: its listing is read).

    The chain's policy is set whether it was there or not: `ebtables -N` alone ends a chain in a
    rule that accepts, so a frame the chain let through would skip the rest of the host's chain
    (an operator's own rules), and every listing of such a chain deletes and adds that rule again,
    so two listings at once, in two worker processes, fail one of them."""
    if not (await ebtables(*table, "-P", name, "RETURN", check=False))[0]:
        made, _ = await ebtables(*table, "-N", name, "-P", "RETURN", check=False)
        if not made:  # made by another worker process in between, or it fails with ebtables' reason
            await ebtables(*table, "-P", name, "RETURN")
    for chain in jumps:
        _, rules = await ebtables(*table, "-L", chain)
        if " ".join([*match, "-j", name]) not in rules.splitlines():
            await ebtables(*table, "-I", chain, "1", *match, "-j", name)


def owned() -> tuple[str, ...]:
    """The comment that names this worker on each rule it makes for its shared bridges, so a killed
    worker's rules are swept (bridge_rules.sweep_rules)."""
    return ("-m", "comment", "--comment", f"{OWNER_MARK}{process_identity()}")
