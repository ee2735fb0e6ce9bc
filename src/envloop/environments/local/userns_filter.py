"""The seccomp filter that keeps a sandboxed command from creating user namespaces.

A process that can make a user namespace of its own holds every capability inside it, which opens
kernel code no unprivileged process otherwise reaches. bwrap's `--disable-userns` prevents that by
creating a second, nested user namespace and lowering `user.max_user_namespaces` inside it, on
every command: a namespace more to make and tear down, and a `/proc/sys` lookup that grows slow as
the kernel's dentry cache fills. This filter refuses the same calls instead: `clone` and `unshare`
asking for `CLONE_NEWUSER` fail with EPERM, and `clone3` (whose flags a filter cannot read) with
ENOSYS, which C libraries take as "use clone". It covers every ABI a process on the host can call
the kernel with (on x86-64 also i386 and x32); a call from any other ABI kills the process.

Built once per process with libseccomp (`pyseccomp`); where libseccomp is not installed, or the
machine is not one whose `clone` takes its flags first, there is no filter and bwrap's
`--disable-userns` is used.
"""

import errno
import functools
import os

CLONE_NEWUSER = 0x10000000


@functools.cache
def userns_filter() -> bytes | None:
    """The filter as a classic BPF program (what bwrap's `--add-seccomp-fd` reads), or None."""
    try:
        import pyseccomp as seccomp  # noqa: PLC0415 - loads libseccomp, only for sandboxed trials
    except (ImportError, OSError, RuntimeError):  # RuntimeError: libseccomp is not installed
        return None
    companions = {
        seccomp.Arch.X86_64: (seccomp.Arch.X86, seccomp.Arch.X32),
        seccomp.Arch.AARCH64: (seccomp.Arch.ARM,),
    }.get(seccomp.system_arch())
    if companions is None:  # e.g. s390x, whose clone takes its flags second
        return None
    refused = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    try:
        program = seccomp.SyscallFilter(seccomp.ALLOW)
        for arch in companions:
            program.add_arch(arch)
        for call in ("clone", "unshare"):
            program.add_rule(seccomp.ERRNO(errno.EPERM), call, refused)
        program.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        fd = os.memfd_create("userns-filter", os.MFD_CLOEXEC)
        with os.fdopen(fd, "w+b") as out:
            program.export_bpf(out)
            out.seek(0)
            return out.read()
    except OSError:
        return None
