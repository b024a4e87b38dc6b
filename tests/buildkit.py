"""Helpers of test_tasks.py and test_faults.py: copies of the sample key, a counting compiler
launcher (with injectable faults), doit / exps-codegen runs in subprocesses, snapshots, and one
reference build per test session whose object cache the other tests copy ("warm" caches).

Every build here targets arch 90 with `chunk=0` (no autotune), so it compiles quickly and needs
no GPU. The AIR subset SMALL (Tiny, Skipped and the Shared pair) keeps a cold build at ~15 s on
2 cores; Large (5,400 Q ops) is only used by slow tests.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# these tests count real linker runs: no linked-.so cache here (test_cold_rebuild turns it on)
os.environ["EXPS_LINK_CACHE"] = "0"

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "provingkey-sample"
DODO = REPO / "dodo.py"

TINY = "synth/Basic/airs/Tiny/air/Tiny"
MEDIUM = "synth/Basic/airs/Medium/air/Medium"
LARGE = "synth/Basic/airs/Large/air/Large"
SKIPPED = "synth/Basic/airs/Skipped/air/Skipped"
SHARED1 = "synth/Rec/airs/Shared/recursive1/Shared"
SHARED2 = "synth/Rec/airs/Shared/recursive2/Shared"
SMALL = (TINY, SKIPPED, SHARED1, SHARED2)
ALL = (TINY, MEDIUM, LARGE, SKIPPED, SHARED1, SHARED2)

TINY_KEY = "basic_a0_0_b4_e50"
SKIPPED_KEY = "basic_a0_3_b4_e81"
SHARED_KEY = "recursive_a1_0_b5_e246"
KEY_OF = {TINY: TINY_KEY, SKIPPED: SKIPPED_KEY, SHARED1: SHARED_KEY, SHARED2: SHARED_KEY,
          MEDIUM: "basic_a0_1_b6_e624", LARGE: "basic_a0_2_b5_e5722"}

ARGS = ("arch=90",)                  # doit variables of every build here (+ chunk=Kit.chunk)
CLI_ARGS = ("--arch", "90", "--chunk", "0")   # exps-codegen flags of a build with chunk 0
PROGRESS = re.compile(r"^\[\d+/\d+\] ", re.M)  # a line our reporter prints per executed task


def exps_codegen() -> list[str]:
    exe = shutil.which("exps-codegen")
    return [exe] if exe else [sys.executable, "-m", "codegen.cli"]


# ------------------------------------------------------------------------------- keys
def copy_key(dst: Path, airs=SMALL) -> Path:
    """The JSON inputs of `airs` (rel paths as in SMALL) copied from the sample key to `dst`."""
    for rel in airs:
        d = dst / Path(rel).parent
        d.mkdir(parents=True, exist_ok=True)
        for suffix in (".starkinfo.json", ".expressionsinfo.json"):
            shutil.copyfile(SAMPLE / (rel + suffix), dst / (rel + suffix))
    return dst


def copy_sample(dst: Path) -> Path:
    """The sample key as the checkout tracks it (its JSON files and README), copied to `dst`: never
    the `.exps.so` files a `doit` in the checkout placed there."""
    shutil.copytree(SAMPLE, dst, ignore=shutil.ignore_patterns("*.exps.so", "*.so", "*.tmp"))
    return dst


def copy_repo(dst: Path) -> Path:
    """A copy of the parts of the checkout a build runs from (dodo.py, codegen/, templates/, and
    the sample key's JSON), for tests that change a template or build the sample with a bare
    `doit`: the copy's dodo.py imports the copy's codegen, whose TEMPLATES are the copy's."""
    dst.mkdir(parents=True)
    for name in ("codegen", "templates"):
        shutil.copytree(REPO / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(DODO, dst / "dodo.py")
    copy_sample(dst / "provingkey-sample")
    return dst


def so_path(pk: Path, rel: str) -> Path:
    return pk / (rel + ".exps.so")


def so_files(pk: Path) -> set[str]:
    """rel paths (without suffix) of every `.exps.so` under the key."""
    return {str(p.relative_to(pk))[: -len(".exps.so")] for p in pk.rglob("*.exps.so")}


def tree(d: Path) -> dict[str, tuple[int, int, bytes]]:
    """rel path -> (size, mtime_ns, bytes) of every file under d."""
    out = {}
    for p in sorted(Path(d).rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(d))] = (st.st_size, st.st_mtime_ns, p.read_bytes())
    return out


def _load(p: Path):
    return json.loads(p.read_text())


def _dump(p: Path, obj) -> None:
    p.write_text(json.dumps(obj, separators=(",", ":")))


def bump_q_number(pk: Path, rel: str) -> None:
    """Change the first number literal of the AIR's Q expression (other expressions untouched)."""
    si = _load(pk / (rel + ".starkinfo.json"))
    ei_path = pk / (rel + ".expressionsinfo.json")
    ei = _load(ei_path)
    q = next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])
    src = next(s for op in q["code"] for s in op["src"] if s["type"] == "number")
    src["value"] = str(int(src["value"]) + 1)
    _dump(ei_path, ei)


def make_zi_boundary_skip(pk: Path, rel: str) -> None:
    """Add a firstRow boundary and make Q use Zi boundaryId 1: the AIR must then be skipped."""
    si_path = pk / (rel + ".starkinfo.json")
    si = _load(si_path)
    si["boundaries"].append({"name": "firstRow"})
    _dump(si_path, si)
    ei_path = pk / (rel + ".expressionsinfo.json")
    ei = _load(ei_path)
    q = next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])
    zis = [s for op in q["code"] for s in op["src"] if s["type"] == "Zi"]
    assert zis, "Q has no Zi operand"
    for s in zis:
        s["boundaryId"] = 1
    _dump(ei_path, ei)


# ------------------------------------------------------------------------------- launcher
_LAUNCHER = """#!/bin/sh
# test compiler launcher: log the call, maybe misbehave, then run the real command
case " $* " in *" -shared "*) kind=link ;; *) kind=cc ;; esac
printf '%s %s\\n' "$kind" "$*" >> {log}
{fault}
exec "$@"
"""

FAULTS = {
    # nvcc reports an error
    "fail": 'echo "injected failure: $kind" >&2; exit 1',
    # the compiler crashes (killed by a signal)
    "crash": "ulimit -c 0; kill -s SEGV $$",
    # the compiler hangs
    "hang": "exec sleep 300",
    # a linker that writes a partial output, then fails
    "partial": 'out=; prev=; for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done; '
               'printf partial > "$out"; echo "injected link failure" >&2; exit 1',
    # stall (for SIGKILL tests): write the pid (the sleep's, after exec) to a marker, then sleep.
    # The marker appears whole (written beside it, then renamed): a test that kills the build the
    # moment a marker exists never reads one half-written (an empty pid)
    "stall": 'echo $$ > {marker}-part.$$ && mv {marker}-part.$$ {marker}.$$; exec sleep 300',
    # hold (for concurrency tests): the same marker, then wait for the file {marker}.go (at most
    # 300 s) and run the real command
    "hold": 'echo $$ > {marker}-part.$$ && mv {marker}-part.$$ {marker}.$$; i=0; '
            'while [ ! -e {marker}.go ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i + 1)); done',
}


def write_launcher(path: Path, log: Path, *, fault: str | None = None, kind: str = "cc",
                   match: str = "", marker: Path | None = None) -> str:
    """A launcher script that appends `<cc|link> argv` to `log`; with `fault`, calls of `kind`
    whose argv contains `match` misbehave (FAULTS). Returns the launcher command. The script is
    always named `launcher.sh` (`path` itself, or `<path without suffix>/launcher.sh`): the object
    cache keys what a launcher made by the launcher's name, and every test launcher is the same
    transparent one, so a warm cache copied from the reference build hits through any of them."""
    snippet = ""
    if fault:
        body = FAULTS[fault].replace("{marker}", shlex.quote(str(marker or path.with_suffix(".pid"))))
        snippet = f'if [ "$kind" = {kind} ]; then case "$*" in *{shlex.quote(match)}*) {body} ;; esac; fi'
    script = path if path.name == "launcher.sh" else path.parent / path.stem / "launcher.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(_LAUNCHER.format(log=shlex.quote(str(log)), fault=snippet))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@dataclass
class Calls:
    compiles: list[str]    # TU file names, in call order
    links: list[str]       # kernel key of each link (from its objects' paths)
    #: the compiles among them of a TU's bounded twin (`-DEXPS_TWIN`: compiled from source when a
    #: launcher keeps no PTX), by TU file name
    twins: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.compiles) + len(self.links)


def calls(log: Path) -> Calls:
    """The nvcc invocations a launcher logged (compiles by `-c`, links by `-shared`)."""
    cc, ln, tw = [], [], []
    text = log.read_text() if log.exists() else ""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        argv = shlex.split(rest)
        if kind == "cc":
            assert "-c" in argv, line          # every mode: -c (-fatbin: a device TU, -cubin: a probe)
            cc.append(Path(next(a for a in argv if a.endswith((".cu", ".cpp")))).name)
            if "-DEXPS_TWIN" in argv:
                tw.append(cc[-1])
        else:
            assert kind == "link" and "-shared" in argv, line
            keys = {Path(a).parent.parent.name for a in argv if a.endswith(".o")}
            assert len(keys) == 1, line
            ln.append(keys.pop())
    return Calls(cc, ln, tw)


# ------------------------------------------------------------------------------- a key in a dir
@dataclass
class Kit:
    """A provingKey copy with its build dir, object cache and counting launcher under `root`."""

    root: Path
    pk: Path
    build: Path
    cache: Path
    log: Path
    launcher: str
    runs: list[float] = field(default_factory=list)
    chunk: int = 0      # ops per Q chunk (0: one kernel; Large needs chunks: ptxas takes > 10 min)
    dodo: Path = DODO   # the dodo.py its doit runs (a copy_repo's, to build with changed templates)

    def env(self, **extra) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
        env["EXPS_CACHE_DIR"] = str(self.cache)
        env["EXPS_LINK_CACHE"] = "0"          # count every real link
        env["EXPS_BUILD_ROOT"] = str(self.root / "builds")   # default build dirs stay in the test
        # nvcc work dirs too: a build reaps the work dirs of killed processes (with an INFO line on
        # stderr), and another test's SIGKILLed build must not add that line to this test's output
        tmp = self.root / "tmp"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def doit_argv(self, *args, launcher: str | None = None, build: Path | None = None) -> list[str]:
        return [sys.executable, "-m", "doit", "-f", str(self.dodo), "-d", str(self.root), *args,
                f"pk={self.pk}", f"build={build or self.build}", *ARGS, f"chunk={self.chunk}",
                f"launcher={launcher or self.launcher}"]

    def doit(self, *args, launcher: str | None = None, build: Path | None = None, env: dict | None = None,
             check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        """`python -m doit -f <repo>/dodo.py -d <root> ... pk= build= arch=90 chunk=0 launcher=`."""
        t0 = time.perf_counter()
        p = run(self.doit_argv(*args, launcher=launcher, build=build), self.root, self.env(**(env or {})),
                timeout, self.root)
        self.runs.append(time.perf_counter() - t0)
        if check:
            assert p.returncode == 0, f"doit failed (rc={p.returncode}):\n{p.stdout}\n{p.stderr}"
        return p

    def cli(self, *args, env: dict | None = None, check: bool = True, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
        p = run([*exps_codegen(), *args], cwd or self.root, self.env(**(env or {})), timeout, self.root)
        if check:
            assert p.returncode == 0, f"exps-codegen failed (rc={p.returncode}):\n{p.stdout}\n{p.stderr}"
        return p

    def status(self, build: Path | None = None) -> tuple[dict[str, str], str]:
        """`exps-codegen status` -> ({air: state}, stdout)."""
        p = self.cli("status", str(self.pk), "--build-dir", str(build or self.build), check=False)
        assert p.returncode in (0, 1), p.stderr
        states = {}
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("synth/"):
                states[parts[0]] = parts[1]
        return states, p.stdout

    def calls(self) -> Calls:
        return calls(self.log)

    def reset_log(self) -> None:
        self.log.unlink(missing_ok=True)

    def manifest(self, key: str) -> dict:
        return _load(self.build / key / "manifest.json")

    def tus(self, key: str) -> list[str]:
        return sorted(self.manifest(key)["files"])


def run(argv: list[str], cwd: Path, env: dict, timeout: float, root: Path) -> subprocess.CompletedProcess:
    """subprocess.run in a new session; on a timeout the whole tree is killed (also the nvcc
    process groups it started: found by `root` in their command line), then re-raised."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        kill_strays(root)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def kill_strays(root: Path) -> list[int]:
    """SIGKILL, by pid, the processes a killed build left behind: the compiler launchers and nvcc
    runs (each in its own session) whose command line names a file under `root`."""
    me, hits = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if str(root).encode() in cmd:
            try:
                os.kill(int(d.name), signal.SIGKILL)
                hits.append(int(d.name))
            except OSError:
                pass
    return hits


def new_kit(root: Path, airs=SMALL, cache_from: Path | None = None,
            exclude: tuple[str, ...] = ()) -> Kit:
    """A fresh key under `root`; its private cache is a copy of `cache_from` (a warm cache) less
    the entries of the kernels in `exclude` (those compile cold)."""
    root.mkdir(parents=True, exist_ok=True)
    pk = copy_key(root / "pk", airs)
    cache = root / "cache"
    if cache_from is not None:
        copy_cache(cache_from, cache, exclude)
    log = root / "nvcc.log"
    return Kit(root, pk, root / "build", cache, log, write_launcher(root / "launcher.sh", log))


# ------------------------------------------------------------------------------- reference build
@dataclass
class Ref:
    kit: Kit
    proc: subprocess.CompletedProcess
    seconds: float
    entry_of: dict[str, str]     # cache entry file name -> TU name


_REF: Ref | None = None


def shared_dir(tmp_path_factory, name: str) -> tuple[Path, Path]:
    """(a directory, its lock file) shared by every process of the test session: under pytest-xdist
    the workers' base temp dirs are siblings, and their parent is the session's."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / name, base / (name + ".lock")


def reference(tmp_path_factory) -> Ref:
    """One cold build of SMALL per test session (through doit and dodo.py, from another directory),
    shared by the pytest-xdist workers: the first one to get the lock builds it, the others read
    what it recorded. Tests copy its object cache so that their own builds compile only what they
    are about; none writes into it."""
    global _REF
    if _REF is None:
        import fcntl
        root, lock = shared_dir(tmp_path_factory, "ref")
        with open(lock, "a") as fd:
            fcntl.flock(fd, fcntl.LOCK_EX)       # released when the file closes
            done = root / "done.json"
            if done.is_file():
                d = _load(done)
                kit = Kit(root, root / "pk", root / "build", root / "cache", root / "nvcc.log",
                          str(root / "launcher.sh"))
                proc = subprocess.CompletedProcess(d["argv"], d["returncode"], d["stdout"], d["stderr"])
                secs = d["seconds"]
            else:
                shutil.rmtree(root, ignore_errors=True)       # a build cut short by a killed worker
                kit = new_kit(root)
                t0 = time.perf_counter()
                proc = kit.doit()
                secs = time.perf_counter() - t0
                _dump(done, {"argv": proc.args, "returncode": proc.returncode, "stdout": proc.stdout,
                             "stderr": proc.stderr, "seconds": secs})
        _REF = Ref(kit, proc, secs, entries_by_tu(kit))
    return _REF


def cache_key_of(tu: Path) -> str:
    """The object cache key of a source of a build made with ARGS (arch 90): a device TU's fatbin,
    or a launch table's object (its key holds the fatbins it embeds, from the kernel's obj dir)."""
    from codegen.build.kernelcc import compile_options, host_options
    from codegen.build.cache import ObjectCache
    from codegen.emit import device_tus
    cache = ObjectCache(root="/nonexistent")
    if tu.suffix == ".cu":   # with the device prelude as a build decides it (its probe's own cache),
        opts = compile_options([90], ObjectCache(Path(tempfile.gettempdir()) / "exps-test-prelude-cache"))
        return cache.key_for(tu, opts, include_dirs=[tu.parent], launcher=["launcher.sh"])   # via a kit's launcher
    tus = device_tus(p.name for p in tu.parent.iterdir())
    obj = tu.parent.parent / "obj"
    inputs = {f"f{i}.fatbin": obj / (Path(n).stem + ".o") for i, n in enumerate(tus)}
    # (a launch table is never compiled through a launcher)
    return cache.key_for(tu, host_options([90]), include_dirs=[tu.parent], inputs=inputs)


def entries_by_tu(kit: Kit) -> dict[str, str]:
    """Object cache entry file name -> the name of the source it was compiled from (a kernel's
    device TUs and launch table; the generic launcher, the same for every kernel, is not listed)."""
    out = {}
    for tu in sorted([*kit.build.glob("*/src/*.cu"), *kit.build.glob("*/src/*_abi.cpp")]):
        out[f"{cache_key_of(tu)}.obj"] = tu.name
    return out


def copy_cache(src: Path, dst: Path, exclude: tuple[str, ...] = ()) -> None:
    assert _REF is not None, "reference() first"
    for f in src.rglob("*.obj"):
        tu = _REF.entry_of.get(f.name, "")
        if any(tu.startswith(k + "_") for k in exclude):
            continue
        (dst / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / f.parent.name / f.name)


# ------------------------------------------------------------------------------- checks
def expected_hash(kit: Kit, rel: str) -> str:
    """The exps_source_hash a current `.so` of AIR `rel` carries (for a build with ARGS)."""
    from codegen.discover import discover
    from codegen.emit import source_hash
    from codegen.tasks import Settings
    s = Settings(pk=kit.pk, build=kit.build, arch="90", chunk=kit.chunk)
    p = next(p for p in discover(kit.pk) if p.rel == rel)
    return source_hash(p.content, s.hashed())


def load_so(path: Path) -> tuple[str, str]:
    """dlopen a placed `.so` and call its identity exports (no GPU needed)."""
    lib = ctypes.CDLL(str(path))
    for name in ("exps_source_hash", "exps_emitter_version"):
        getattr(lib, name).restype = ctypes.c_char_p
    return lib.exps_emitter_version().decode(), lib.exps_source_hash().decode()


def assert_all_current(kit: Kit, expect_placed=(TINY, SHARED1, SHARED2), skipped=(SKIPPED,)) -> None:
    """Status says current/skipped, the placed set is exact, every `.so` loads and is current."""
    states, out = kit.status()
    assert states == {**{r: "current" for r in expect_placed}, **{r: "skipped" for r in skipped}}, out
    assert so_files(kit.pk) == set(expect_placed)
    from codegen import EMITTER_VERSION
    for rel in expect_placed:
        assert load_so(so_path(kit.pk, rel)) == (EMITTER_VERSION, expected_hash(kit, rel))


def leftovers(*dirs: Path) -> list[str]:
    """Temp files of the atomic writer (`.<name>.<pid>.<hex>.tmp`) left anywhere under dirs."""
    return [str(p) for d in dirs for p in Path(d).rglob("*.tmp")]

