"""The guard every tool runs under (codegen/build/procs.py): what the tool sees and what the caller
gets back, as with the subprocess-based guard it replaced (~45 ms of CPU per tool, now
~10), and that the guard starts lean (no `site`, no subprocess)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codegen.build import procs


def _run(argv: list[str], **kw) -> tuple[int, str]:
    p = procs.guarded_popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    try:
        out, _ = p.communicate(timeout=60)
    finally:
        procs.release(p)
    return p.returncode, out.decode()


@pytest.mark.parametrize("code", [0, 1, 3, 200])
def test_exit_code_passes_through(code):
    assert _run(["sh", "-c", f"exit {code}"]) == (code, "")


def test_a_signalled_tool_is_128_plus_its_signal():
    assert _run(["sh", "-c", "kill -9 $$"])[0] == 128 + signal.SIGKILL
    assert _run(["sh", "-c", "kill -15 $$"])[0] == 128 + signal.SIGTERM


def test_a_tool_that_cannot_start_is_127_and_one_line(tmp_path):
    rc, out = _run([str(tmp_path / "no-such-tool"), "-c"])
    assert rc == 127 and out.startswith(f"cannot run {tmp_path / 'no-such-tool'}: ") and out.count("\n") == 1


def test_the_tool_is_found_on_path_and_gets_argv_cwd_env(tmp_path):
    rc, out = _run(["sh", "-c", 'printf "%s|%s|%s" "$0" "$PWD" "$EXPS_T"', "zero"], cwd=tmp_path,
                   env=dict(os.environ, EXPS_T="x y"))
    assert (rc, out) == (0, f"zero|{tmp_path}|x y")


def test_the_tool_sees_fds_0_to_2_only_and_default_sigpipe():
    """As Popen(close_fds=True, restore_signals=True) gave it: no fd of ours, SIGPIPE and SIGXFSZ
    not ignored (Python ignores them; a tool writing to a closed pipe must die as it would), nor
    SIGINT, SIGTERM and SIGHUP (the guard handles them, and exec makes a handled signal default),
    and every other signal as the caller had it (a test run started in the background of a
    non-interactive shell ignores SIGQUIT, and so does the tool)."""
    r, w = os.pipe()    # an fd of ours, inheritable: must not reach the tool
    os.set_inheritable(w, True)
    try:
        rc, out = _run(["sh", "-c", "ls /proc/$$/fd; grep SigIgn /proc/$$/status"])
    finally:
        os.close(r)
        os.close(w)
    *fds, ign = out.splitlines()
    assert rc == 0 and fds == ["0", "1", "2"]
    ours = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("SigIgn"))
    restored = sum(1 << (s - 1) for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM,
                                          signal.SIGHUP))
    assert int(ign.split()[1], 16) == int(ours.split()[1], 16) & ~restored


def test_the_guard_leads_a_session_of_its_own_and_kill_group_ends_the_tool():
    p = procs.guarded_popen(["sh", "-c", "sleep 60"], stdout=subprocess.PIPE)
    try:
        assert os.getpgid(p.pid) == p.pid and os.getsid(p.pid) == p.pid
        for _ in range(500):    # (empty for a moment right after the exec)
            if (cmd := open(f"/proc/{p.pid}/cmdline", "rb").read().split(b"\0")) != [b""]:
                break
            time.sleep(0.01)
        assert cmd[:3] == [sys.executable.encode(), b"-S", b"-c"]     # no site
        procs.kill_group(p)
        p.communicate(timeout=30)
    finally:
        procs.release(p)
    assert p.returncode == -signal.SIGKILL


def test_the_guard_starts_lean():
    """`python -S` (no site: no .pth files), and none of subprocess / signal (enum) imported."""
    probe = procs.GUARD.replace("\npid = os.fork()", "\nsys.stderr.write(' '.join(sorted(sys.modules)) + '\\n')"
                                                     "\npid = os.fork()")
    assert probe != procs.GUARD
    out = subprocess.run([sys.executable, "-S", "-c", probe, str(os.getpid()), "true"],
                         capture_output=True, text=True, timeout=60, start_new_session=True)
    mods = set(out.stderr.split())
    assert out.returncode == 0 and "os" in mods
    assert not mods & {"site", "subprocess", "signal", "enum", "threading"}, mods & {"site", "subprocess", "signal"}


def test_a_second_signal_while_the_first_exit_unwinds_is_ignored():
    """Ctrl-C twice, or `timeout -s INT`, which signals the process and then its process group: the
    second signal arrives while the first one's SystemExit unwinds (at worst inside the thread
    joins of interpreter shutdown, where raising again printed "Exception ignored ... Traceback").
    It must change nothing: one line, exit 128 + the first signal."""
    code = """if True:
        import signal, sys
        from codegen.build import procs
        procs.install()
        try:
            signal.raise_signal(signal.SIGINT)
        except SystemExit as e:
            first = e.code
        signal.raise_signal(signal.SIGTERM)      # while that exit unwinds
        print("second ignored", first)
        sys.exit(first)
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (130, "second ignored 130\n"), (p.returncode, p.stdout, p.stderr)
    assert p.stderr.splitlines() == [procs.INTERRUPT_LINE], p.stderr
