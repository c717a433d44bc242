"""The seccomp filter a jailed worker runs under: a short deny list, everything else allowed.

Namespaces already keep a worker from seeing the host; the filter closes what they leave
open inside the jail and around the kernel: tracing or reading other processes' memory
(``ptrace``, ``process_vm_readv``/``writev``), leaving or rebuilding the namespaces
(``setns``, ``unshare``, ``mount``, ``pivot_root``, ``chroot``), loading code into the kernel
(``bpf``, ``*_module``, ``kexec_*``), and kernel facilities no kernel benchmark needs
(keyrings, ``userfaultfd``, ``syslog``, swap, reboot, I/O ports, file handles). A denied call
fails with EPERM. The program is classic BPF, built here for x86-64 (the only architecture
the GPU machines run); on any other architecture, and for x32 system calls, it denies
nothing and everything respectively.
"""

from __future__ import annotations

import platform
import struct

# x86-64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED_X86_64 = {
    "ptrace": 101,
    "syslog": 103,
    "chroot": 161,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "pivot_root": 155,
    "fsopen": 430,
    "fsmount": 432,
    "move_mount": 429,
    "open_tree": 428,
}

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM = 1
# struct seccomp_data: int nr; __u32 arch; ...
_OFF_NR, _OFF_ARCH = 0, 4
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The filter as the bytes ``bwrap --seccomp FD`` reads, or None off x86-64."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    denied = sorted(set(DENIED_X86_64.values()))
    deny_at = 6 + len(denied)  # index of the "deny" return: 4 loads and checks, the x32 test, the list, allow
    insns = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),  # another architecture's calls: allowed (not filtered)
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    # x32 calls (numbers with the x32 bit) reach the same kernel functions by other numbers: denied whole.
    insns.append(_insn(_JGE_K, deny_at - len(insns) - 1, 0, _X32_BIT))
    for nr in denied:
        insns.append(_insn(_JEQ_K, deny_at - len(insns) - 1, 0, nr))
    insns.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    assert len(insns) == deny_at
    insns.append(_insn(_RET_K, 0, 0, _RET_ERRNO | _EPERM))
    return b"".join(insns)
