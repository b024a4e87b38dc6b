"""One build at a time per build dir: an flock on `<build>/.lock` that records its owner.

- A second build on the same dir says once `waiting for the build in <dir> (pid N)…` and waits.
- A lock whose recorded owner is dead never blocks: if something still holds the flock (orphans of
  a killed build of an older version), the lock file is replaced and the new one taken over.
- Forked children (doit workers) drop their copy of the descriptor (procs.child_fd_closers), so
  only the owner process holds the lock and it is released when that process ends, however.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

from codegen.build import procs
from codegen.build.fsutil import pid_alive

_HELD: dict[str, int] = {}
POLL_S = 0.25
OWNER_WAIT_S = 1.0    # how long a waiting build re-reads a lock file the holder has not yet written its pid to


class LockBusy(RuntimeError):
    """The build dir is locked by a live build (raised with wait=False)."""


def _owner(path: Path) -> int | None:
    try:
        text = path.read_text(errors="replace").split()
        return int(text[0]) if text else None
    except (OSError, ValueError):
        return None


def acquire(build_dir: Path | str, wait: bool = True, out=None) -> None:
    """Take the lock of `build_dir` (created by the caller) for this process."""
    d = Path(build_dir)
    path = d / ".lock"
    if str(path) in _HELD:
        return
    told = False
    out = out or sys.stderr
    t0 = time.monotonic()
    while True:
        d.mkdir(parents=True, exist_ok=True)    # (`clean` may have removed it while we waited)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = _owner(path)
            if owner is not None and owner != os.getpid() and not pid_alive(owner):
                tmp = d / f".lock.{os.getpid()}"
                tmp.write_text("")
                os.replace(tmp, path)   # the dead build's orphans keep the old inode locked
                out.write(f"exps-codegen: took over the lock of {d} from pid {owner}, which is gone\n")
                continue
            if not wait:
                raise LockBusy(f"another build (pid {owner or '?'}) is running in {d}") from None
            if owner is None and time.monotonic() - t0 < OWNER_WAIT_S:
                time.sleep(POLL_S)   # the holder writes its pid just after its flock: read it again
                continue
            if not told:
                out.write(f"exps-codegen: waiting for the build in {d} (pid {owner or '?'})\u2026\n")
                out.flush()
                told = True
            time.sleep(POLL_S)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:          # replaced between our open and our flock: lock the new file
            os.close(fd)
            continue
        try:   # record the owner (a full disk only costs the name in the waiting message)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        _HELD[str(path)] = fd
        procs.child_fd_closers.append(lambda fd=fd: os.close(fd))
        return


def release(build_dir: Path | str) -> None:
    """Release the lock (an embedding process may build again)."""
    fd = _HELD.pop(str(Path(build_dir) / ".lock"), None)
    if fd is not None:
        try:
            procs.child_fd_closers.remove(next(c for c in procs.child_fd_closers
                                               if c.__defaults__ == (fd,)))
        except StopIteration:
            pass
        os.close(fd)
