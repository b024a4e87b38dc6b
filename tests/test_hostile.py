"""Hostile inputs through the real CLI (`exps-codegen build/status` subprocesses, arch 90, chunk 0, the
SMALL AIRs): hostile path names never execute anything, unreadable / vanished AIRs lose their
`.so` with a line in the summary, strict JSON (duplicate key, dangling hint) fails one AIR only,
and a full disk (a real tmpfs) gives one line per failing AIR and no partial `.so`.

nvcc hands its paths to `sh`: a name such as `k$(touch $INJ_MARK)` would create the file named by
the environment variable INJ_MARK (an absolute path, so it shows wherever the shell ran). Those
builds run real nvcc compiles and links (a private object cache, no link cache); the other tests
reuse one warm object + link cache and take well under a second per build.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from buildkit import DODO, SAMPLE, SHARED1, SHARED2, TINY, copy_key, exps_codegen
from codegen.build import toolchain as tc
from require import require

pytestmark = pytest.mark.requires("nvcc")      # tests/require.py: skip, or fail under EXPS_REQUIRE

BUILT = (TINY, SHARED1, SHARED2)          # the SMALL AIRs that get a .so (Skipped is skipped)
MARK = "$INJ_MARK"


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


class Env:
    """A tmp root with its own object cache, build root (EXPS_BUILD_ROOT) and marker path."""

    def __init__(self, root: Path, cache: Path, link_cache: bool = True):
        self.root, self.cache = root, cache
        self.mark = root / "INJ_MARK_FILE"
        self.env = dict(os.environ, EXPS_CACHE_DIR=str(cache), EXPS_BUILD_ROOT=str(root / "builds"),
                        EXPS_LINK_CACHE="1" if link_cache else "0", INJ_MARK=str(self.mark))
        self.env.pop("EXPS_LAUNCHER", None)

    def run(self, cmd: str, pk: Path, build: Path | None = None, timeout: float = 300,
            exe: list[str] | None = None) -> tuple[int, str]:
        argv = [*(exe or exps_codegen()), cmd, os.fsencode(str(pk))]
        argv += ["--arch", "90", "--chunk", "0"] if cmd in ("build", "emit", "verify") else []
        if build is not None:
            argv += ["--build-dir", os.fsencode(str(build))]
        r = subprocess.run(argv, env=self.env, cwd=self.root, capture_output=True, timeout=timeout)
        return r.returncode, _text(r.stdout) + _text(r.stderr)


def _no_traceback(out: str) -> None:
    assert "Traceback" not in out, out


def _so_files(pk: Path) -> dict[str, bytes]:
    return {str(p.relative_to(pk))[: -len(".exps.so")]: p.read_bytes() for p in pk.rglob("*.exps.so")}


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> tuple[Env, dict[str, bytes]]:
    """One build of SMALL filling a shared object + link cache; the `.so` bytes it placed."""
    root = tmp_path_factory.mktemp("hostile")
    e = Env(root, root / "cache")
    pk = copy_key(root / "warm_pk")
    rc, out = e.run("build", pk, root / "warm_build")
    assert rc == 0, out
    so = _so_files(pk)
    assert sorted(so) == sorted(BUILT)
    return e, so


@pytest.fixture
def env(warm, tmp_path: Path) -> Env:
    """A fresh root per test sharing the warm caches."""
    return Env(tmp_path, warm[0].cache)


# ============================================================================ hostile names
SHELL = f"k$(touch {MARK}) `touch {MARK}`; touch {MARK}; 'q\" sp"


@pytest.mark.parametrize("pk_name,build_name,cold", [
    # `$(...)`, backticks, `;`, quotes and spaces in both names; nvcc compiles and links for real
    (SHELL, "b" + SHELL, True),
    # a newline (and a command after it) in both names
    (f"k\ntouch {MARK}\n$(touch {MARK})", f"b\ntouch {MARK}\n", False),
    # the default build dir (EXPS_BUILD_ROOT/<safe name>-<digest>) of a hostile key name
    (SHELL, None, False),
    # a build dir that is not valid UTF-8
    ("k_plain", os.fsdecode(b"b\xff$(touch $INJ_MARK)"), False),
], ids=["shell", "newline", "default_build_dir", "non_utf8_build_dir"])
def test_hostile_names_build_and_execute_nothing(warm, tmp_path: Path, pk_name, build_name, cold) -> None:
    _, ref = warm
    # no link cache (every link runs nvcc); "cold": an empty object cache (every compile runs it)
    e = Env(tmp_path, tmp_path / "cache" if cold else warm[0].cache, link_cache=False)
    pk = copy_key(tmp_path / pk_name)
    build = tmp_path / build_name if build_name is not None else None
    rc, out = e.run("build", pk, build)
    assert rc == 0, out
    _no_traceback(out)
    assert not e.mark.exists(), "a path was run by a shell"
    assert list(tmp_path.rglob("INJ_MARK*")) == []
    got = _so_files(pk)
    assert sorted(got) == sorted(BUILT)
    assert {k: len(v) for k, v in got.items()} == {k: len(ref[k]) for k in BUILT}
    assert "4 AIRs: 2 kernels generated, 2 compiled, 3 .so placed, 1 skipped, 0 failed" in out
    if build is not None:
        assert (build / ".lock").exists() or any(build.iterdir())     # the build dir named was used
    rc, out = e.run("status", pk, build)
    assert rc == 0 and "3 current, 0 stale, 0 missing, 1 skipped" in out, out


def test_non_utf8_key_name_is_refused_with_one_line(env: Env) -> None:
    pk = copy_key(Path(os.fsdecode(bytes(env.root) + b"/k\xfe$(touch $INJ_MARK)")))
    rc, out = env.run("build", pk, env.root / "b")
    assert rc == 2, out
    assert out.count("\n") == 1 and "provingKey path is not valid UTF-8" in out, out
    assert not env.mark.exists() and _so_files(pk) == {}


def test_non_utf8_air_inside_the_key_is_refused_the_others_build(env: Env, warm) -> None:
    pk = copy_key(env.root / "pk")
    bad = Path(os.fsdecode(bytes(pk) + b"/synth/Basic/airs/T\xffny/air"))
    bad.mkdir(parents=True)
    for suffix in (".starkinfo.json", ".expressionsinfo.json"):
        shutil.copyfile(SAMPLE / (TINY + suffix), bad / ("Tiny" + suffix))
    rc, out = env.run("build", pk, env.root / "b")
    _no_traceback(out)
    assert sorted(_so_files(pk)) == sorted(BUILT)
    assert "synth/Basic/airs/T\\xffny/air/Tiny" in out and "refused: path is not valid UTF-8" in out, out
    assert "1 refused" in out, out
    assert rc == 1, out         # a refused AIR is bad input: the others build, the run says so


# ============================================================== unreadable or vanished AIRs
def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _dir(p: Path) -> None:
    p.unlink()
    p.mkdir()


def _loop(p: Path) -> None:
    p.unlink()
    p.symlink_to(p.name)


def _no_exprs(p: Path) -> None:
    p.with_name(p.name.replace(".starkinfo.", ".expressionsinfo.")).unlink()


@pytest.mark.parametrize("make,why", [
    (_fifo, "starkinfo is a FIFO"),
    (_dir, "starkinfo is a directory"),
    (_loop, "starkinfo is a symlink loop"),
    (_no_exprs, "expressionsinfo is missing"),
], ids=["fifo", "directory", "symlink_loop", "vanished_expressionsinfo"])
def test_unreadable_air_loses_its_so(env: Env, make, why: str) -> None:
    pk = copy_key(env.root / "pk")
    build = env.root / "b"
    rc, out = env.run("build", pk, build)
    assert rc == 0 and sorted(_so_files(pk)) == sorted(BUILT), out
    shared = {r: (pk / (r + ".exps.so")).stat().st_mtime_ns for r in (SHARED1, SHARED2)}
    make(pk / (TINY + ".starkinfo.json"))
    rc, out = env.run("build", pk, build, timeout=300)       # a read of the FIFO would hang: TimeoutExpired
    _no_traceback(out)
    assert sorted(_so_files(pk)) == [SHARED1, SHARED2]
    assert {r: (pk / (r + ".exps.so")).stat().st_mtime_ns for r in (SHARED1, SHARED2)} == shared
    assert f"removed {pk / TINY}.exps.so: was built, now unreadable: {why}" in out, out
    # the summary keeps a row for the AIR (a refused one now), and so does status
    [row] = [ln for ln in out.splitlines() if ln.startswith(TINY + " ")]
    assert "refused" in row and f"unreadable: {why}" in row, out
    assert rc == 1, out         # a refused AIR is bad input: the others build, the run says so
    rc, out = env.run("status", pk, build, timeout=120)
    [row] = [ln for ln in out.splitlines() if ln.startswith(TINY + " ")]
    assert "refused" in row and f"unreadable: {why}" in row, out
    assert "2 current, 0 stale, 0 missing, 1 skipped" in out, out


def test_so_of_a_vanished_air_is_removed(env: Env) -> None:
    pk = copy_key(env.root / "pk")
    build = env.root / "b"
    assert env.run("build", pk, build)[0] == 0
    for suffix in (".starkinfo.json", ".expressionsinfo.json"):
        (pk / (TINY + suffix)).unlink()
    rc, out = env.run("build", pk, build)
    _no_traceback(out)
    assert rc == 0, out
    assert sorted(_so_files(pk)) == [SHARED1, SHARED2]
    assert f"removed {pk / TINY}.exps.so: was built, now its AIR is gone: no Tiny.starkinfo.json" in out, out


# ============================================================ duplicate key, dangling hint
def _dup_nbits(si: Path, ei: Path) -> tuple[Path, str]:
    d = json.loads(si.read_text())
    d["starkStruct"]["__dup__"] = 1
    si.write_text(json.dumps(d).replace('"__dup__": 1', '"nBits": 99'))
    return si, "starkStruct.nBits: duplicate key 'nBits'"


def _dangling_hint(si: Path, ei: Path) -> tuple[Path, str]:
    d = json.loads(ei.read_text())
    assert d["hintsInfo"][0]["fields"][1]["values"][0]["op"] == "tmp"
    d["hintsInfo"][0]["fields"][1]["values"][0]["id"] = 4242
    ei.write_text(json.dumps(d))
    return ei, ("hintsInfo[0].fields[1].values[0].id: hint references expression 4242, "
                "which is not in expressionsCode")


@pytest.mark.parametrize("mutate", [_dup_nbits, _dangling_hint], ids=["duplicate_key", "dangling_hint"])
def test_strict_json_fails_one_air_only(env: Env, mutate) -> None:
    pk = copy_key(env.root / "pk")
    build = env.root / "b"
    assert env.run("build", pk, build)[0] == 0
    file, msg = mutate(pk / (TINY + ".starkinfo.json"), pk / (TINY + ".expressionsinfo.json"))
    rc, out = env.run("build", pk, build)
    _no_traceback(out)
    assert sorted(_so_files(pk)) == [SHARED1, SHARED2]           # Tiny's old .so is gone
    [row] = [ln for ln in out.splitlines() if ln.startswith(TINY + " ")]
    assert " bad input " in row and "bad input: " in row, out        # (a long reason ends in … in the table)
    assert f"FAILED link:{TINY}: {TINY}: bad input: {Path(file).relative_to(pk)}: {msg}\n" in out, out
    assert "2 .so placed (already current), 1 skipped, 0 failed, 1 bad input" in out, out
    assert rc == 1, out


# ======================================================================== a full disk
def _mount_tmpfs(d: Path, size: str) -> None:
    require("tmpfs")      # skip, or fail under EXPS_REQUIRE (tests/require.py)
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], check=True,
                   capture_output=True, text=True)


def _fill(d: Path, leave: int) -> Path:
    st = os.statvfs(d)
    filler = d / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


@pytest.fixture
def tmpfs(tmp_path: Path):
    d = tmp_path / "mnt"
    _mount_tmpfs(d, "8m")
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


def test_full_disk_one_line_per_air_no_partial_so(env: Env, warm, tmpfs: Path) -> None:
    """Key and build dir on an 8 MiB tmpfs filled up to ~1.2 MiB free: the JSON stages fit, the
    objects and the `.so` files (~1.1 MiB each) do not all fit. Whatever stage hits ENOSPC, that AIR fails with
    one line, no partial or temporary file stays in the key, and the summary matches the disk."""
    _, ref = warm
    pk = copy_key(tmpfs / "pk")
    filler = _fill(tmpfs, 1200 << 10)
    rc, out = env.run("build", pk, tmpfs / "b")
    _no_traceback(out)
    assert rc != 0, out
    errors = [ln for ln in out.splitlines() if ln.startswith("ERROR:")]
    # (the build state's line: "[Errno 28] No space left on device" from dbm.dumb, "No space left
    # on device (database or disk is full)" from dbm.sqlite3, Python 3.13's default)
    assert errors and all("No space left on device" in ln for ln in errors), out
    assert all("[Errno 28] No space left on device" in ln for ln in errors if "build state" not in ln), out
    got = _so_files(pk)
    # a .so on disk is a complete, current one (nvcc links are not byte-reproducible: sizes here,
    # the embedded source hash through status)
    assert {r: len(v) for r, v in got.items()} == {r: len(ref[r]) for r in got}
    assert f"{len(got)} .so placed" in out, out
    rc_s, st = env.run("status", pk, tmpfs / "b")
    for rel in BUILT:
        [row] = [ln for ln in st.splitlines() if ln.startswith(rel + " ")]
        assert ("current" if rel in got else "missing") in row, st
    failed = [r for r in BUILT if r not in got]
    assert failed, out
    for rel in failed:      # each failing AIR is named by an error line (its own or its kernel's)
        assert any(rel in ln for ln in errors), (rel, out)
    names = {p.name for p in pk.rglob("*") if p.is_file()}
    assert all(n.endswith((".starkinfo.json", ".expressionsinfo.json", ".exps.so")) for n in names), names
    # space again: the next build completes and places every .so
    filler.unlink()
    rc, out = env.run("build", pk, tmpfs / "b")
    assert rc == 0, out
    assert {r: len(v) for r, v in _so_files(pk).items()} == {r: len(ref[r]) for r in BUILT}
    rc, st = env.run("status", pk, tmpfs / "b")
    assert rc == 0 and "3 current, 0 stale, 0 missing, 1 skipped" in st, st


@pytest.mark.parametrize("leave", [0, 64 << 10], ids=["no_space", "64k"])
def test_build_dir_full_from_the_start(env: Env, tmpfs: Path, leave: int) -> None:
    """A build dir on a full file system is a user mistake caught up front: one line, exit 2."""
    pk = copy_key(env.root / "pk")
    _fill(tmpfs, leave)
    rc, out = env.run("build", pk, tmpfs / "b")
    _no_traceback(out)
    assert rc == 2, out
    assert re.search(r"^exps-codegen: error: (build dir .*: only \d+ KiB free on its file system|"
                     r"cannot create the build dir .*: No space left on device)", out, re.M), out
    assert _so_files(pk) == {}


# ====================================================== doit's build state: its save, its reading
#: `exps-codegen` whose dbm save hits a full disk: dbm.dumb (doit's dbm on a Python without gdbm)
#: with its index write raising ENOSPC, as the file system would; everything else is the real CLI
SAVE_FAILS = """
import dbm, dbm.dumb, errno, os, sys
dbm._names = ["dbm.dumb"]
def _commit(self):
    if self._index is not None and self._modified:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._dirfile)
dbm.dumb._Database._commit = _commit
from codegen.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _state_files(build: Path) -> list[str]:
    return sorted(p.name for p in build.glob(".doit.db*"))


def _stages_ran(out: str) -> int:
    return len(re.findall(r"^\[\d+/\d+\] ", out, re.M))


def test_build_state_save_fails_one_line_exit_1_next_build_redoes(env: Env, warm) -> None:
    """doit saves its state once, at the end: when that fails the build says so in one line and
    exits 1, the `.so` files it placed are the complete ones, the half-written state is gone, and
    the next build checks every stage again (then a third has nothing to do)."""
    _, ref = warm
    pk, b = copy_key(env.root / "pk"), env.root / "b"
    rc, out = env.run("build", pk, b, exe=[sys.executable, "-c", SAVE_FAILS])
    _no_traceback(out)
    assert rc == 1, out
    [err] = [ln for ln in out.splitlines() if ln.startswith("ERROR:")]
    assert err == (f"ERROR: could not save the build state {b / '.doit.db'}: [Errno 28] No space left "
                   f"on device; removed, so the next build checks every stage again"), out
    assert "3 .so placed, 1 skipped" in out, out
    assert {r_: len(v) for r_, v in _so_files(pk).items()} == {r_: len(ref[r_]) for r_ in BUILT}
    assert _state_files(b) == [], _state_files(b)
    rc, out = env.run("build", pk, b)
    assert rc == 0 and _stages_ran(out) == 16 and "ERROR" not in out, out
    rc, out = env.run("build", pk, b)
    assert rc == 0 and "4 AIRs up to date (3 .so placed, 1 skipped); nothing to do" in out, out


def test_a_full_disk_under_dbm_sqlite3_is_said_as_a_full_disk(tmp_path: Path) -> None:
    """dbm.sqlite3 (Python 3.13's default) raises an OSError without errno from sqlite's
    SQLITE_FULL: the save's line says what the other backends' ENOSPC says; another sqlite error
    keeps its own words. Any Python: the errors are made here as that module makes them."""
    import sqlite3

    from codegen.build import statedb

    def sqlite_error(name: str, msg: str) -> OSError:
        e = sqlite3.OperationalError(msg)
        e.sqlite_errorname = name
        try:
            raise e
        except sqlite3.Error as exc:
            try:
                raise OSError(str(exc))          # dbm.sqlite3's `raise error(str(exc))`
            except OSError as wrapped:
                return wrapped

    for err, why in [(sqlite_error("SQLITE_FULL", "database or disk is full"),
                      "No space left on device (database or disk is full)"),
                     (sqlite_error("SQLITE_READONLY", "attempt to write a readonly database"),
                      "attempt to write a readonly database")]:
        (tmp_path / ".doit.db").write_bytes(b"x")

        class Backend:
            name = str(tmp_path / ".doit.db")

            def dump(self, err=err):
                raise err

        dm = type("DM", (), {"backend": Backend()})()
        statedb.guard(dm)
        dm.backend.dump()
        assert statedb.save_error() == (f"could not save the build state {tmp_path / '.doit.db'}: {why}; "
                                        f"removed, so the next build checks every stage again")
        assert not (tmp_path / ".doit.db").exists()


def _mid_line(data: bytes) -> int:
    """An offset that falls strictly inside the middle line of dbm.dumb's .dir index (lines
    ``'key', (pos, size)``): the line cut there cannot parse, whatever the key's length."""
    lines = data.split(b"\n")
    i = sum(len(ln) + 1 for ln in lines[:len(lines) // 2])
    line = lines[len(lines) // 2]
    assert line.endswith(b")") and len(line) > 10, data
    return i + len(line) // 2


def test_mid_line_cut_never_reads_back(tmp_path: Path) -> None:
    """The .dir cut above, on dbm.dumb files of every key length from 1 to 79: statedb.check
    finds each one unreadable and removes it."""
    import dbm.dumb
    from codegen.build import statedb
    for n in range(1, 80):
        db = tmp_path / f"s{n}" / statedb.NAME
        db.parent.mkdir()
        with dbm.dumb.open(str(db), "c") as d:
            for j in range(5):
                d["k" * (n + j)] = json.dumps({"j": j})
        d_ = db.with_name(db.name + ".dir")
        data = d_.read_bytes()
        d_.write_bytes(data[:_mid_line(data)])
        note = statedb.check(db)
        assert note is not None and "did not read back" in note, (n, data)
        assert not d_.exists()


def _cut_state(b: Path, part: str) -> None:
    """Cut build dir `b`'s state short, as a build killed while doit saved it leaves it, whatever
    dbm module made it (the Python that ran the build decides): dbm.dumb's index (.dir) inside a
    line (a cut at a line's end would leave a sound, smaller index: the stages it no longer names
    run again, no note; where half of it falls varies with the build's timestamps) or its data
    (.dat) inside a value; a one-file dbm (dbm.gnu, dbm.sqlite3 from Python 3.13 on, dbm.ndbm's
    .db) at half or three quarters of its length."""
    db = b / ".doit.db"
    index, values = db.with_name(db.name + ".dir"), db.with_name(db.name + ".dat")
    if index.exists():
        f = index if part == "index" else values
        data = f.read_bytes()
        assert len(data) > 200, data
        f.write_bytes(data[:_mid_line(data)] if part == "index" else data[:len(data) // 2 + 3])
        return
    [f] = [p for p in (db, db.with_name(db.name + ".db")) if p.is_file()]
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2 if part == "index" else len(data) * 3 // 4])


@pytest.mark.parametrize("part", ["index", "data"])
def test_build_state_cut_short_is_removed_with_a_note(env: Env, warm, part: str) -> None:
    """A state file cut short (a build killed while doit saved it) does not parse; the next
    build removes it with one note, checks every stage again and exits 0; through both front
    ends (the CLI here, dodo.py below)."""
    pk, b = copy_key(env.root / "pk"), env.root / "b"
    rc, out = env.run("build", pk, b)
    assert rc == 0, out
    _cut_state(b, part)
    rc, out = env.run("build", pk, b)
    _no_traceback(out)
    assert rc == 0, out
    notes = [ln for ln in out.splitlines() if "did not read back" in ln]
    assert len(notes) == 1 and notes[0].startswith(
        f"exps-codegen: note: the build state {b / '.doit.db'} did not read back ("), out
    assert notes[0].endswith("a build killed while saving it?): removed, so this build checks every stage again"), out
    assert _stages_ran(out) == 16, out
    rc, out = env.run("build", pk, b)
    assert rc == 0 and "nothing to do" in out and "did not read back" not in out, out


def test_build_state_cut_short_through_dodo(env: Env, warm) -> None:
    pk, b = copy_key(env.root / "pk"), env.root / "b"
    argv = [sys.executable, "-m", "doit", "-f", str(DODO), "-d", str(env.root), f"pk={pk}",
            f"build={b}", "arch=90", "chunk=0"]
    run = lambda: subprocess.run(argv, env=env.env, cwd=env.root, capture_output=True, text=True, timeout=300)
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    _cut_state(b, "index")
    r = run()
    out = r.stdout + r.stderr
    _no_traceback(out)
    assert r.returncode == 0 and "did not read back" in r.stderr and _stages_ran(r.stdout) == 16, out


# ============================================================ nvcc work dirs of dead pids
def test_reap_stale_workdirs(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"exps-nvcc-{dead.pid}-abc_123"
    live = tmp_path / f"exps-link-{os.getppid()}-xyz"
    mine = tmp_path / f"exps-nvcc-{os.getpid()}-q"
    other = tmp_path / "exps-other-1-x"
    for d in (stale, live, mine, other):
        (d / "src").mkdir(parents=True)
    (stale / "src" / "k.cu").write_text("x")
    assert tc.reap_stale_workdirs(tmp_path) == [str(stale)]
    assert not stale.exists() and live.is_dir() and mine.is_dir() and other.is_dir()


def test_safe_names() -> None:
    assert tc.safe_component("basic_a0_0.cu") == "basic_a0_0.cu"
    for bad in ("a b.o", "$(x).o", "a'b", "-rf", "..", "x\n.o"):
        got = tc.safe_component(bad)
        assert tc._SAFE_COMPONENT.fullmatch(got) and not got.startswith("-") and got not in (".", ".."), got
    assert tc.safe_component("a b.o").endswith(".o") and tc.safe_component("a b.o") != tc.safe_component("a c.o")
    assert tc.SAFE_PATH.fullmatch(tc.safe_temp_root())
    with pytest.raises(tc.UnsafePathError):
        tc._check_safe("k$(id).cu", "translation unit name")
    assert stat.S_ISDIR(os.stat(tc.safe_temp_root()).st_mode)
