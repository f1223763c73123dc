"""Limits per sandbox, not per process (bwrap): total memory, no nested user namespace, a capped scratch.

Each attack is the one that got through before: six processes each under the per-process memory limit
but over it together; a nested user namespace mounting its own tmpfs; /scratch filled across files.
Where this machine cannot make a cgroup or mount a tmpfs the backend falls back with a warning and the
corresponding test is skipped, saying so.
"""

from __future__ import annotations

import os
import sys

import pytest

from evoharness.sandbox.containment import _can_mount, cgroup_layout, no_userns_filter
from evoharness.sandbox.models import Limits

SIX_PROCESSES = """
import os, sys, time
kids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            blob = bytearray(b'\\x01') * (150 * 1024 * 1024)  # touched: resident, not just reserved
            time.sleep(3)
            os._exit(0)
        except MemoryError:
            os._exit(3)
    kids.append(pid)
codes = [os.waitpid(k, 0)[1] for k in kids]
print('children', codes)
sys.exit(0 if all(c == 0 for c in codes) else 9)
"""

NESTED_USERNS = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.unshare(0x10000000)  # CLONE_NEWUSER
print('unshare', rc, os.strerror(ctypes.get_errno()))
sys.exit(0 if rc == 0 else 7)
"""

FILL_SCRATCH = """
import os
import sys
written = 0
try:
    for i in range(4):
        with open(f'/scratch/fill{i}', 'wb') as fh:
            for _ in range(100):
                fh.write(b'x' * (1024 * 1024))
                written += 1
except OSError as e:
    print('stopped', written, e.strerror)
    sys.exit(5)
print('wrote', written)
"""


@pytest.mark.skipif(cgroup_layout() is None, reason="no writable memory+pids cgroup here (the backend warns)")
def test_six_processes_share_one_memory_limit(run_py):
    # each process may reserve 512 MiB of address space; together they may hold no more than 512 MiB
    res = run_py(SIX_PROCESSES, limits=Limits(memory_mb=512, wall_seconds=60, pids=32))
    assert res.returncode != 0 and res.limit == "memory", (res.stdout, res.stderr)


def test_six_small_processes_under_the_total_still_run(run_py):
    small = SIX_PROCESSES.replace("150 * 1024 * 1024", "20 * 1024 * 1024")
    res = run_py(small, limits=Limits(memory_mb=512, wall_seconds=60, pids=32))
    assert res.ok, (res.stdout, res.stderr)


@pytest.mark.skipif(no_userns_filter() is None, reason="the seccomp filter is for x86_64 and aarch64")
def test_no_nested_user_namespace(run_py):
    res = run_py(NESTED_USERNS, limits=Limits(wall_seconds=30))
    assert res.returncode == 7 and "unshare -1 Operation not permitted" in res.stdout, (res.stdout, res.stderr)


@pytest.mark.skipif(not _can_mount(), reason="cannot mount a tmpfs here (the backend warns)")
def test_scratch_is_capped_across_files(run_py, dirs):
    _, work = dirs
    res = run_py(FILL_SCRATCH, limits=Limits(scratch_mb=128, file_mb=256, wall_seconds=60))
    assert res.returncode == 5 and "No space left on device" in res.stdout, (res.stdout, res.stderr)
    written = int(res.stdout.split()[1])
    assert written <= 128
    assert sum(p.stat().st_size for p in work.glob("fill*")) <= 128 * 1024 * 1024  # copied back, capped


SPARSE = """
import os
for i in range(8):
    with open(f'/scratch/sparse{i}', 'wb') as fh:
        fh.truncate(200 * 1024 * 1024)  # 200 MiB of apparent size each, under file_mb, holding nothing
        fh.seek(100 * 1024 * 1024)
        fh.write(b'data in the middle')
print('made')
"""


@pytest.mark.skipif(not _can_mount(), reason="cannot mount a tmpfs here (the backend warns)")
def test_sparse_files_in_scratch_come_back_without_writing_their_holes(run_py, dirs):
    """1.6 GB of apparent size costs the scratch tmpfs a few pages; the copy back wrote every zero of it to the
    host's disk (~14 s of the host's time after a 0.2 s rollout, past its wall limit and its scratch cap)."""
    _, work = dirs
    res = run_py(SPARSE, limits=Limits(scratch_mb=64, file_mb=256, wall_seconds=30))
    assert res.ok and res.stdout.strip() == "made", res.stderr
    files = sorted(work.glob("sparse*"))
    assert len(files) == 8
    for f in files:
        st = f.stat()
        assert st.st_size == 200 * 1024 * 1024 and st.st_blocks * 512 <= 1024 * 1024, (f, st.st_blocks)
        with f.open("rb") as fh:
            fh.seek(100 * 1024 * 1024 - 4)
            assert fh.read(22) == b"\0\0\0\0data in the middle"


def test_files_the_sandbox_writes_come_back(run_py, dirs):
    _, work = dirs
    (work / "request.json").write_text("{}")
    code = ("import os, pathlib; assert pathlib.Path('/scratch/request.json').read_text() == '{}';"
            "pathlib.Path('/scratch/out').mkdir(); pathlib.Path('/scratch/out/0.json').write_text('ok');"
            "os.symlink('/etc/passwd', '/scratch/link'); os.mkfifo('/scratch/fifo')")
    res = run_py(code, limits=Limits(wall_seconds=30))
    assert res.ok, res.stderr
    assert (work / "out" / "0.json").read_text() == "ok"
    assert (work / "link").is_symlink() and (work / "fifo").is_fifo()
    assert sys.executable  # the host's interpreter ran it (python_runtime)


def _bpf(prog: bytes, arch: int, nr: int, arg0: int) -> int:
    """Run a classic-BPF seccomp program (the instructions ``no_userns_filter`` uses) on one syscall."""
    import struct

    ins = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    data = {0: nr, 4: arch, 16: arg0 & 0xFFFFFFFF}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:  # ld [k]
            acc, pc = data[k], pc + 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected BPF code {code:#x}")


@pytest.mark.parametrize("machine,arch,nr", [
    ("x86_64", 0xC000003E, {"clone": 56, "unshare": 272, "clone3": 435, "getpid": 39}),
    ("aarch64", 0xC00000B7, {"clone": 220, "unshare": 97, "clone3": 435, "getpid": 172}),
])
def test_the_seccomp_filter_per_machine(machine, arch, nr):
    """The filter as the kernel would run it: CLONE_NEWUSER refused, a plain clone/unshare allowed, clone3
    ENOSYS (glibc falls back to clone), another ABI refused."""
    prog = no_userns_filter(machine)
    allow, eperm, enosys = 0x7FFF0000, 0x00050001, 0x00050026
    newuser, newns = 0x10000000, 0x00020000
    assert _bpf(prog, arch, nr["unshare"], newuser | newns) == eperm
    assert _bpf(prog, arch, nr["clone"], newuser) == eperm
    assert _bpf(prog, arch, nr["unshare"], newns) == allow
    assert _bpf(prog, arch, nr["clone"], 0x11) == allow  # fork()'s flags
    assert _bpf(prog, arch, nr["clone3"], 0) == enosys
    assert _bpf(prog, arch, nr["getpid"], 0) == allow
    assert _bpf(prog, 0x40000003, nr["getpid"], 0) == eperm  # i386 (or any other ABI)
    if machine == "x86_64":
        assert _bpf(prog, arch, 0x40000000 | 272, newuser) == eperm  # the x32 ABI


def test_bwrap_fails_closed_on_a_machine_without_a_filter(monkeypatch):
    from evoharness.errors import InfraError
    from evoharness.sandbox import containment

    real = os.uname()
    fake = type(real)((real.sysname, real.nodename, real.release, real.version, "riscv64"))
    monkeypatch.setattr(os, "uname", lambda: fake)
    assert no_userns_filter() is None
    with pytest.raises(InfraError, match="no seccomp filter for riscv64"), containment.seccomp_fd():
        pass
