"""Fault cases of the build: nvcc failing, crashing or hanging on one kernel, a failing
linker, a full disk, SIGKILL mid-build, two builds of one key at once, a corrupt cache entry.

In every case: the affected AIR has no `.so` (never a stale or partial one), the error names the
AIR, the other AIRs are built, and the next build (with a working toolchain) completes with every
placed `.so` current. Faults come from the test launcher (buildkit.write_launcher) or, for ENOSPC,
from a patched `os` in codegen.build.fsutil (the atomic writer) in an in-process run.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import buildkit as bk
from buildkit import SHARED1, SHARED2, SHARED_KEY, SKIPPED, TINY, TINY_KEY
from require import requires

pytestmark = requires("nvcc")      # tests/require.py: skip, or fail under EXPS_REQUIRE
PLACED = {TINY, SHARED1, SHARED2}
TIMEOUT_S = 8   # compile timeout of the hang case (a Tiny TU compiles in ~2 s; links take < 1 s)


@pytest.fixture
def ref(tmp_path_factory):
    return bk.reference(tmp_path_factory)


def _kit(ref, tmp_path, monkeypatch, exclude=()):
    k = bk.new_kit(tmp_path, cache_from=ref.kit.cache, exclude=exclude)
    monkeypatch.setenv("EXPS_CACHE_DIR", str(k.cache))
    monkeypatch.delenv("EXPS_LAUNCHER", raising=False)
    return k


@pytest.fixture
def cold_tiny(ref, tmp_path, monkeypatch):
    """SMALL, nothing built, a private cache without Tiny's objects (Tiny compiles, Shared hits)."""
    return _kit(ref, tmp_path, monkeypatch, exclude=(TINY_KEY,))


@pytest.fixture
def built(ref, tmp_path, monkeypatch):
    """SMALL built once from a warm cache; the launcher log reset."""
    k = _kit(ref, tmp_path, monkeypatch)
    k.doit()
    assert bk.so_files(k.pk) == PLACED
    k.reset_log()
    return k


def so_state(kit, rel):
    p = bk.so_path(kit.pk, rel)
    st = p.stat()
    return st.st_size, st.st_mtime_ns, p.read_bytes()


def faulty(kit, fault, kind="cc", match=TINY_KEY, marker=None) -> str:
    return bk.write_launcher(kit.root / f"faulty-{fault}.sh", kit.log, fault=fault, kind=kind, match=match,
                             marker=marker)


def assert_clean_key(kit) -> None:
    """Only inputs and complete `.so` files in the key: no temp or partial files."""
    for p in kit.pk.rglob("*"):
        if p.is_file():
            assert p.name.endswith((".starkinfo.json", ".expressionsinfo.json", ".exps.so")), p
    for rel in bk.so_files(kit.pk):
        bk.load_so(bk.so_path(kit.pk, rel))      # loads: a complete library
    assert bk.leftovers(kit.pk, kit.build) == []


# --------------------------------------------------------------------------------- nvcc -c faults
@pytest.mark.parametrize("fault, old", [
    ("fail", False), ("crash", False), ("hang", False), ("fail", True),
    pytest.param("crash", True, marks=pytest.mark.slow), pytest.param("hang", True, marks=pytest.mark.slow),
], ids=["fail-first_build", "crash-first_build", "hang-first_build", "fail-rebuild_with_old_so",
        "crash-rebuild_with_old_so", "hang-rebuild_with_old_so"])
def test_compile_fault_fails_only_that_air(ref, tmp_path, monkeypatch, fault, old):
    if old:   # Tiny's old .so is there; an edit makes its TU compile (and fail)
        kit = _kit(ref, tmp_path, monkeypatch)
        kit.doit()
        others = {r: so_state(kit, r) for r in (SHARED1, SHARED2)}
        bk.bump_q_number(kit.pk, TINY)
        kit.reset_log()
    else:
        kit = _kit(ref, tmp_path, monkeypatch, exclude=(TINY_KEY,))
    extra = (f"compile_timeout={TIMEOUT_S}",) if fault == "hang" else ()
    # fail / crash: every TU of Tiny's kernel; hang: the device TU with its Q (one TU: q0_x0)
    match = f"{TINY_KEY}_q0" if fault == "hang" else TINY_KEY
    p = kit.doit(*extra, launcher=faulty(kit, fault, match=match), check=False, timeout=300)
    assert p.returncode != 0
    err = p.stdout + p.stderr
    assert f"compile of kernel {TINY_KEY} (AIRs: {TINY}) failed" in err, err
    assert "cc:" + TINY_KEY in err                            # doit names the failed task
    if fault == "hang":      # killed by compile_timeout (the hung launcher sleeps 300 s)
        assert "timed out" in err
    # Tiny: no .so (also not the old one); the others are built (untouched when they were)
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}
    if old:
        assert {r: so_state(kit, r) for r in (SHARED1, SHARED2)} == others
    assert not (kit.build / TINY_KEY / "objs.json").exists()
    assert_clean_key(kit)
    states, out = kit.status()
    assert states == {TINY: "missing", SKIPPED: "skipped", SHARED1: "current", SHARED2: "current"}, out
    # a working nvcc: the next build completes
    kit.reset_log()
    kit.doit()
    assert all(t.startswith(TINY_KEY) for t in kit.calls().compiles) and kit.calls().links == [TINY_KEY]
    bk.assert_all_current(kit)


def test_hung_compiler_is_killed_with_cli_timeout(cold_tiny):
    """`exps-codegen build --compile-timeout S`: the same through the CLI."""
    kit = cold_tiny
    p = kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher",
                faulty(kit, "hang", match=f"{TINY_KEY}_q0"), "--compile-timeout", str(TIMEOUT_S),
                check=False, timeout=300)
    assert p.returncode != 0
    assert f"(AIRs: {TINY}) failed" in p.stderr and "timed out" in p.stderr
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}
    assert_clean_key(kit)


# --------------------------------------------------------------------------------- linker fault
@pytest.mark.parametrize("old", [False, True], ids=["first_build", "relink_over_old_so"])
def test_linker_failure_leaves_no_partial_so(ref, tmp_path, monkeypatch, old):
    kit = _kit(ref, tmp_path, monkeypatch)
    if old:   # a touched .so is re-linked (link_uptodate checks size + mtime)
        kit.doit()
        so = bk.so_path(kit.pk, TINY)
        os.utime(so, ns=(so.stat().st_atime_ns, so.stat().st_mtime_ns + 10**9))
        kit.reset_log()
    # the failing linker first writes a partial output file, then exits 1
    p = kit.doit(launcher=faulty(kit, "partial", kind="link", match="Tiny.exps.so"), check=False)
    assert p.returncode != 0
    assert f"link of {TINY} failed" in p.stderr, p.stderr
    assert "injected link failure" in p.stderr
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}
    assert_clean_key(kit)
    kit.reset_log()
    kit.doit()
    assert kit.calls().compiles == [] and kit.calls().links == [TINY_KEY]
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- disk full
class _FullDiskOs:
    """`os` for codegen.build.fsutil: fsync of an atomic_write temp file whose name matches raises ENOSPC
    (after the data was written into it), as a full disk does."""

    def __init__(self, pattern: re.Pattern):
        self.pattern, self.hits = pattern, []

    def __getattr__(self, name):
        return getattr(os, name)

    def fsync(self, fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if self.pattern.match(os.path.basename(path)):
            self.hits.append(path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return os.fsync(fd)


@pytest.mark.parametrize("target", [".o", ".so"])
def test_disk_full_leaves_no_partial_file(ref, tmp_path, monkeypatch, caplog, target):
    """Warm cache: Tiny's objects are written from cache hits, through the same atomic writer as
    after a compile (a cold compile adds only nvcc time)."""
    import codegen.build.fsutil
    from codegen.cli import run_doit
    from codegen.tasks import Settings

    kit = _kit(ref, tmp_path, monkeypatch)
    pat = (re.compile(rf"^\.{TINY_KEY}_\w+\.o\.\d+\.[0-9a-f]+\.tmp$") if target == ".o"
           else re.compile(r"^\.Tiny\.exps\.so\.\d+\.[0-9a-f]+\.tmp$"))
    fake = _FullDiskOs(pat)
    monkeypatch.setattr(codegen.build.fsutil, "os", fake)
    s = Settings(pk=kit.pk, build=kit.build, arch="90", chunk=0, launcher=kit.launcher)
    with caplog.at_level(logging.ERROR, logger="exps_codegen"):
        assert run_doit(s, ["link"]) != 0
    assert fake.hits                                   # the fault did fire
    what = (f"compile of kernel {TINY_KEY} (AIRs: {TINY}) failed" if target == ".o"
            else f"link of {TINY} failed")
    assert what in caplog.text and "No space left on device" in caplog.text, caplog.text
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}
    assert_clean_key(kit)
    assert bk.leftovers(kit.cache) == []
    if target == ".o":   # no object of Tiny's own published, none cached (the generic inverse kernel's,
        # exps_xinv.o, no key in its name, is not a target of the fault: written whole, or not at all)
        assert list(kit.build.glob(f"{TINY_KEY}/obj/{TINY_KEY}_*")) == []
    monkeypatch.setattr(codegen.build.fsutil, "os", os)
    kit.reset_log()
    kit.doit()                                         # space again: the next build completes
    assert kit.calls().links == [TINY_KEY]
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- SIGKILL
def _wait_for(pattern_dir: Path, prefix: str, proc: subprocess.Popen, timeout: float = 180) -> list[Path]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = sorted(pattern_dir.glob(prefix + ".*"))
        if got:
            time.sleep(0.3)   # let a parallel twin reach its stall too
            return sorted(pattern_dir.glob(prefix + ".*"))
        assert proc.poll() is None, f"build ended before stalling:\n{proc.communicate()}"
        time.sleep(0.05)
    raise AssertionError("the launcher never stalled")


@pytest.mark.parametrize("phase", ["compile", "link"])
def test_sigkill_mid_build_then_next_build_is_correct(ref, tmp_path, monkeypatch, phase):
    """compile: a rebuild after an edit of Tiny (its stale .so must not survive the kill);
    link: a first build from a warm cache, killed while linking Tiny."""
    kit = _kit(ref, tmp_path, monkeypatch)
    if phase == "compile":
        kit.doit()
        bk.bump_q_number(kit.pk, TINY)     # Tiny's .so is stale; its TU must compile
        kit.reset_log()
    marker = kit.root / "stalled"
    launcher = (faulty(kit, "stall", kind="cc", match=TINY_KEY, marker=marker) if phase == "compile"
                else faulty(kit, "stall", kind="link", match="Tiny.exps.so", marker=marker))
    proc = subprocess.Popen(kit.doit_argv(launcher=launcher), cwd=kit.root, env=kit.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        stalls = _wait_for(kit.root, "stalled", proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)          # the build (doit and its workers)
        proc.communicate()
    for m in marker.parent.glob("stalled.*"):        # our stalled launchers (own sessions)
        try:
            os.kill(int(m.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    bk.kill_strays(kit.root)                         # nvcc runs in flight (own sessions too)
    assert stalls
    # killed: Tiny's stale .so was removed before its compile, the new one never placed; any other
    # .so placed is whole and current
    assert TINY not in bk.so_files(kit.pk)
    assert_clean_key(kit)
    states, out = kit.status()
    assert states[TINY] == "missing", out
    placed = bk.so_files(kit.pk)
    assert all(states[r] == ("current" if r in placed else "missing") for r in (SHARED1, SHARED2)), out
    kit.reset_log()
    kit.doit()
    assert {t for t in kit.calls().compiles} <= {f"{TINY_KEY}_q0_x0.cu", "exps_runtime.cpp"}
    bk.assert_all_current(kit)
    kit.reset_log()
    assert kit.doit(env={"EXPS_ASSERT_NO_COMPILE": "1"}).stdout.endswith("up to date (3 .so placed, 1 skipped); nothing to do\n")


# --------------------------------------------------------------------------------- concurrency
def test_two_concurrent_builds_of_one_build_dir(ref, tmp_path, monkeypatch):
    """The build-dir lock serializes two builds: the first is held inside its link of Tiny (a
    launcher that waits for a file) until the second has said that it waits; then the second finds
    everything up to date. (Started together and left to race, the first could finish before the
    second reached the lock under load: a test whose outcome would be a draw.)"""
    kit = _kit(ref, tmp_path, monkeypatch)
    marker = kit.root / "held"
    hold = faulty(kit, "hold", kind="link", match="Tiny.exps.so", marker=marker)
    files = [(open(kit.root / f"out{i}", "w+"), open(kit.root / f"err{i}", "w+")) for i in range(2)]
    first = subprocess.Popen(kit.doit_argv(launcher=hold), cwd=kit.root, env=kit.env(), stdout=files[0][0],
                             stderr=files[0][1], text=True, start_new_session=True)
    procs = [first]
    try:
        _wait_for(kit.root, "held", first)           # the first build holds the lock, in a link
        procs.append(subprocess.Popen(kit.doit_argv(), cwd=kit.root, env=kit.env(), stdout=files[1][0],
                                      stderr=files[1][1], text=True, start_new_session=True))
        deadline = time.monotonic() + 300     # a liveness bound (the first build holds until told)
        while "waiting for the build" not in (kit.root / "err1").read_text() and time.monotonic() < deadline:
            assert procs[1].poll() is None, "the second build ended without waiting"
            time.sleep(0.05)
        assert "waiting for the build" in (kit.root / "err1").read_text(), "the second build never said that it waits"
        (kit.root / "held.go").touch()               # the first build links on
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    outs = [(o.seek(0) or o.read(), e.seek(0) or e.read()) for o, e in files]
    for o, e in files:
        o.close()
        e.close()
    assert codes == [0, 0], outs
    assert bk.PROGRESS.search(outs[0][0]) and not bk.PROGRESS.search(outs[1][0]), outs
    assert outs[1][0] == "4 AIRs up to date (3 .so placed, 1 skipped); nothing to do\n", outs
    assert re.search(r"^exps-codegen: waiting for the build in .*/build \(pid \d+\)\u2026$", outs[1][1], re.M), outs
    assert kit.calls().compiles == []
    assert sorted(kit.calls().links) == sorted([TINY_KEY, SHARED_KEY, SHARED_KEY])
    bk.assert_all_current(kit)      # loadable, exps_source_hash current


@pytest.mark.slow
def test_two_concurrent_cold_builds_share_a_cache(ref, tmp_path, monkeypatch):
    """Two builds of one key into two build dirs with one cold cache, at once: both succeed; the
    placed .so files are complete and current whichever link replaced them last."""
    kit = bk.new_kit(tmp_path)
    monkeypatch.setenv("EXPS_CACHE_DIR", str(kit.cache))
    procs = [subprocess.Popen(kit.doit_argv(build=kit.root / f"build{i}"), cwd=kit.root, env=kit.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert bk.leftovers(kit.pk, kit.cache) == []
    for i in range(2):
        kit.build = kit.root / f"build{i}"
        bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- cache damage
@pytest.mark.parametrize("damage", ["truncate", "flip_byte"])
def test_corrupt_cache_entry_is_detected_and_rebuilt(ref, tmp_path, monkeypatch, damage):
    from codegen.build.cache import ObjectCache

    kit = _kit(ref, tmp_path, monkeypatch)
    tu = ref.kit.build / TINY_KEY / "src" / f"{TINY_KEY}_q0_x0.cu"
    key = bk.cache_key_of(tu)
    entry = ObjectCache(kit.cache).path(key)
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    else:
        i = len(data) - 100                  # inside the object bytes
        entry.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    kit.doit()
    # only the damaged one recompiled (not Shared's); the same fatbin again: its table is a cache hit
    assert kit.calls().compiles == [tu.name]
    assert ObjectCache(kit.cache).get(key) is not None  # and the entry is whole again
    bk.assert_all_current(kit)
