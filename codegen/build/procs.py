"""Child processes that die with us, and interrupts that end a build in one line.

Three promises:
- **No orphan compilers.** Every tool (nvcc and its cicc/ptxas children) runs under a small
  guard process (:func:`guarded_popen`): the guard leads a process group of its own, asks the
  kernel for a signal when its parent dies (``PR_SET_PDEATHSIG``) and then kills its whole group.
  So a build killed even with SIGKILL leaves no nvcc running, and a timeout or an interrupt kills
  the group (``os.killpg``) in one call.
- **No orphan doit workers.** Processes forked from a build (doit's ``-n N`` workers) get a
  parent-death signal too, ignore the terminal's SIGINT (the parent handles it and terminates
  them: no worker tracebacks) and drop their copy of the build lock.
- **Interrupts are one line.** SIGINT / SIGTERM / SIGHUP in the main process: kill every running
  guard group, terminate the workers, print ``exps-codegen: interrupted — rerun to continue`` and
  exit with 128 + 2 = 130 (SIGINT) / 143 / 129 through ``SystemExit`` (no traceback; doit still
  closes its dependency file, so what finished is not redone).
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

PR_SET_PDEATHSIG = 1
INTERRUPT_LINE = "exps-codegen: interrupted \u2014 rerun to continue"

#: pgid of every live guard (one per running tool), so an interrupt can kill them all
_live: set[int] = set()
_live_lock = threading.Lock()
_interrupted: int = 0            # the signal that interrupted this process (0: none)
_installed = False
_main_pid = os.getpid()
#: called in a forked child (doit worker): close the fds it must not keep (the build lock)
child_fd_closers: list[Callable[[], None]] = []

# The guard: `python -S -c GUARD argv...`. It is the leader of a new session (Popen
# start_new_session), so its pgid is its pid and nvcc, cicc and ptxas share it. One runs per tool
# (~140 per cold build of ../shared/pk), so it starts lean: no `site` (-S: no .pth files, no user
# site; it needs only the standard library), `_signal` instead of `signal` (no enum), and fork +
# execvp + waitpid instead of subprocess (whose imports would be most of the guard's own time):
# ~10 ms of CPU a tool instead of ~45. The tool gets what Popen gave it: the
# guard's fds 0-2 only (the guard itself is started with close_fds; Python opens its own with
# O_CLOEXEC), SIGPIPE and SIGXFSZ back to their defaults and no other signal ignored (Popen's
# restore_signals; not posix_spawn, which leaves glibc's internal signals 32 and 33 ignored in
# the tool), a PATH lookup of argv[0], exit 127 and one line when it cannot be started, and the
# guard exits with its code (128 + n for a signal n).
GUARD = r"""
import os, sys, _signal as signal
ppid = int(sys.argv[1])
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)   # PR_SET_PDEATHSIG
except Exception:
    pass
def die(*_):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGKILL)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, die)
if os.getppid() != ppid:        # the parent died before the prctl took effect
    die()
pid = os.fork()
if pid == 0:                    # the tool: what Popen(restore_signals=True) gave it
    try:
        for n in ("SIGPIPE", "SIGXFSZ"):
            signal.signal(getattr(signal, n), signal.SIG_DFL)
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        e = OSError(e.errno, e.strerror, sys.argv[2])     # (Popen's error names the tool)
        sys.stderr.write("cannot run %s: %s\n" % (sys.argv[2], e))
        sys.stderr.flush()
    finally:
        os._exit(127)
rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
sys.exit(rc if rc >= 0 else 128 - rc)
"""


def interrupted() -> int:
    """The signal number that interrupted this process, or 0."""
    return _interrupted


class Interrupted(RuntimeError):
    """A tool was about to start after the build was interrupted."""


def guarded_popen(argv: Sequence[str], **kw) -> subprocess.Popen:
    """Popen(argv) under a guard that kills argv's whole process tree if we die or time out.
    The returned process is the guard; ``os.killpg(p.pid, SIGKILL)`` ends the tree."""
    if _interrupted:
        raise Interrupted("the build was interrupted")
    kw.pop("start_new_session", None)
    p = subprocess.Popen([sys.executable, "-S", "-c", GUARD, str(os.getpid()), *argv],
                         start_new_session=True, **kw)
    with _live_lock:
        _live.add(p.pid)
    return p


def release(p: subprocess.Popen) -> None:
    """Forget a finished guard (call after wait/communicate)."""
    with _live_lock:
        _live.discard(p.pid)


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """SIGKILL every live guard group (their tools die with them)."""
    with _live_lock:
        pids = list(_live)
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _set_pdeathsig(sig: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: workers then rely on doit's terminate()
        pass


def _after_fork_in_child() -> None:
    """A forked child (a doit worker): dies with its parent, leaves SIGINT to the parent."""
    global _installed
    if not _installed:
        return
    _installed = False
    _set_pdeathsig(signal.SIGKILL)
    if os.getppid() == 1:     # the parent is already gone
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    with _live_lock:
        _live.clear()
    for close in child_fd_closers:
        try:
            close()
        except OSError:
            pass


def _on_signal(signum, frame) -> None:
    global _interrupted
    if os.getpid() != _main_pid:     # a forked child that has not run the fork hook
        os._exit(128 + signum)
    if _interrupted:
        # a second signal (a second Ctrl-C, or `timeout`, which signals the process and then its
        # group) while the first one's exit unwinds: that exit is under way, and raising again
        # inside it (a thread join at interpreter shutdown) prints a traceback
        return
    _interrupted = signum
    logging.disable(logging.CRITICAL)   # the compiles we kill now would each log a failure
    try:   # doit's worker processes first: SIGTERM ends them at once (they cannot log a failed
        # compile); their guards then die by the parent-death signal
        import multiprocessing
        for c in multiprocessing.active_children():
            c.terminate()
    except Exception:   # noqa: BLE001 — an interrupt must never turn into a traceback
        pass
    kill_all()          # the guards this process started itself (the CLI's threads)
    try:
        sys.stderr.write(INTERRUPT_LINE + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(128 + _interrupted)


def install() -> None:
    """Install the interrupt handlers in this (main) process; idempotent."""
    global _installed, _main_pid
    if threading.current_thread() is not threading.main_thread():
        return
    _main_pid = os.getpid()
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    if not _installed:
        _installed = True
        if not getattr(install, "_fork_hook", False):
            os.register_at_fork(after_in_child=_after_fork_in_child)
            install._fork_hook = True   # type: ignore[attr-defined]
