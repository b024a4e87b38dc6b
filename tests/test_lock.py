"""The build lock (codegen/buildlock.py): one build per build dir; a second one says whom it waits
for; a lock whose recorded owner is dead never blocks, even if an orphan still holds the flock."""
from __future__ import annotations

import io
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from codegen.build import buildlock

HOLD = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0); os.pwrite(fd, (sys.argv[2] + "\n").encode(), 0)
print("held", flush=True)
time.sleep(float(sys.argv[3]))
print("released", flush=True)
fcntl.flock(fd, fcntl.LOCK_UN)
time.sleep(30)
"""


def _holder(lock: Path, owner: str, secs: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), owner, str(secs)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline() == "held\n"
    return p


def _released(h: subprocess.Popen) -> bool:
    """The holder has said, by now, that it lets go of the flock (it prints that line before its
    unlock): a look at its pipe that does not wait."""
    return bool(select.select([h.stdout], [], [], 0)[0]) and h.stdout.readline() == "released\n"


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_waits_for_a_live_owner_and_says_so(tmp_path: Path) -> None:
    h = _holder(tmp_path / ".lock", "{pid}", 1.5)
    try:
        # the holder records its own pid, as a build does
        (tmp_path / ".lock").write_text(f"{h.pid}\n")
        out = io.StringIO()
        buildlock.acquire(tmp_path, out=out)
        ended = _released(h)           # the holder let go before we got the lock
    finally:
        h.kill()
        h.wait()
    buildlock.release(tmp_path)
    assert ended
    assert out.getvalue() == f"exps-codegen: waiting for the build in {tmp_path} (pid {h.pid})\u2026\n"


def test_a_dead_owners_lock_is_taken_over_at_once(tmp_path: Path) -> None:
    """An orphan (say a worker of a SIGKILLed build from an older version) still holds the flock,
    but the pid the lock records is gone: taken over, no wait."""
    dead = _dead_pid()
    h = _holder(tmp_path / ".lock", str(dead), 30)
    try:
        out = io.StringIO()
        buildlock.acquire(tmp_path, out=out)
        assert h.poll() is None           # taken over while the orphan still runs: no wait for it
        assert out.getvalue() == f"exps-codegen: took over the lock of {tmp_path} from pid {dead}, which is gone\n"
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
    finally:
        buildlock.release(tmp_path)
        h.kill()
        h.wait()


def test_forked_children_do_not_keep_the_lock(tmp_path: Path) -> None:
    """doit's -n workers are forked while we hold the lock: they drop their copy (procs' fork
    hook), so the lock goes with the owner process, whatever its children do."""
    import signal

    from codegen.build import procs
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    procs.install()
    for s, h in saved.items():          # pytest keeps its own handlers; the fork hook stays
        signal.signal(s, h)
    buildlock.acquire(tmp_path)
    pid = os.fork()
    if pid == 0:       # the child: the lock must be free once the parent has released its fd
        time.sleep(30)
        os._exit(0)
    try:
        buildlock.release(tmp_path)
        probe = subprocess.run([sys.executable, "-c",
                                "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR);"
                                "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')",
                                str(tmp_path / ".lock")], capture_output=True, text=True)
        assert probe.stdout == "free\n", probe.stderr
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        procs._installed = False


LATE = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
print("held", flush=True)
time.sleep(0.4)                       # the pid comes a moment after the flock, as in acquire()
os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
time.sleep(float(sys.argv[2]))
"""


def test_a_waiter_reads_the_owner_written_just_after_its_flock(tmp_path: Path) -> None:
    """The lock file is empty between the holder's flock and its pid write: the waiting message
    still names the holder, never `pid ?`."""
    lock = tmp_path / ".lock"
    h = subprocess.Popen([sys.executable, "-c", LATE, str(lock), "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert h.stdout.readline() == "held\n"
        out = io.StringIO()
        buildlock.acquire(tmp_path, out=out)
        assert out.getvalue() == f"exps-codegen: waiting for the build in {tmp_path} (pid {h.pid})\u2026\n"
        buildlock.release(tmp_path)
    finally:
        h.kill()
        h.wait()
