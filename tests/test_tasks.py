"""The build graph's promises, through the real dodo.py, exps-codegen and a
pipeline's own dodo.py. A counting launcher logs every nvcc call (compiles: `-c`, links:
`-shared`); each test has a private object cache (a copy of the session's reference build cache,
so only what a test is about compiles). See buildkit.py.
"""
from __future__ import annotations

import collections
import re
import subprocess
import sys
import textwrap

import pytest

import buildkit as bk
from buildkit import SHARED1, SHARED2, SHARED_KEY, SKIPPED, SKIPPED_KEY, TINY, TINY_KEY
from require import requires

from codegen.emit import COMMON_FILES

pytestmark = requires("nvcc")      # tests/require.py: skip, or fail under EXPS_REQUIRE
PLACED = {TINY, SHARED1, SHARED2}


@pytest.fixture
def ref(tmp_path_factory):
    return bk.reference(tmp_path_factory)


@pytest.fixture
def kit(ref, tmp_path, monkeypatch):
    """A fresh copy of SMALL with a warm private cache (nothing built yet)."""
    k = bk.new_kit(tmp_path, cache_from=ref.kit.cache)
    monkeypatch.setenv("EXPS_CACHE_DIR", str(k.cache))
    monkeypatch.delenv("EXPS_LAUNCHER", raising=False)
    return k


@pytest.fixture
def built(kit):
    """`kit` after one build (from the warm cache: links only); the launcher log is reset."""
    kit.doit()
    assert bk.so_files(kit.pk) == PLACED
    kit.reset_log()
    return kit


def executed(out: str) -> set[str]:
    """Tasks our reporter says it ran (`[n/N] stage:name (t)` lines)."""
    return {line.split()[1] for line in out.splitlines() if bk.PROGRESS.match(line)}


def so_state(kit, rel):
    p = bk.so_path(kit.pk, rel)
    st = p.stat()
    return st.st_size, st.st_mtime_ns, p.read_bytes()


# --------------------------------------------------------------------------------- first build
def test_first_build_exact_outputs_and_compiles(ref):
    kit, out = ref.kit, ref.proc.stdout
    # placed: exactly the three buildable AIRs; Skipped has none
    assert bk.so_files(kit.pk) == PLACED
    # every TU of every generated kernel compiled exactly once; the shared pair is one kernel
    tiny, shared = kit.tus(TINY_KEY), kit.tus(SHARED_KEY)
    # a small kernel is one device TU of its own, the generic inverse kernel's TU (both have an
    # expression no hint inverts) and its launch table
    assert tiny == sorted([f"{TINY_KEY}_abi.cpp", f"{TINY_KEY}_q0_x0.cu", "exps_xinv.cu"])
    assert shared == sorted([f"{SHARED_KEY}_abi.cpp", f"{SHARED_KEY}_q0_x0.cu", "exps_xinv.cu"])
    assert (kit.build / TINY_KEY / "src" / "exps_xinv.cu").read_bytes() == \
        (kit.build / SHARED_KEY / "src" / "exps_xinv.cu").read_bytes()
    c = kit.calls()
    # every device TU compiled once, no duplicate: the generic inverse kernel's, the same text in both
    # kernels, once for both (the other an object-cache hit), and the generic launcher once for both
    # kernels (through the launcher: a launch table never goes through one, kernelcc.compile_kernel)
    [xinv] = [n for n in c.compiles if n.endswith("_xinv.cu")]
    assert xinv == "exps_xinv.cu"
    assert sorted(c.compiles) == sorted([f"{TINY_KEY}_q0_x0.cu", f"{SHARED_KEY}_q0_x0.cu", xinv, "exps_runtime.cpp"])
    assert sorted(c.links) == sorted([TINY_KEY, SHARED_KEY, SHARED_KEY])   # two links, one kernel
    assert kit.manifest(SKIPPED_KEY)["files"] == {} and "boundaries" in kit.manifest(SKIPPED_KEY)["skip"]
    assert so_state(kit, SHARED1)[2] == so_state(kit, SHARED2)[2]
    assert {d.name for d in kit.build.iterdir() if d.is_dir()} == {TINY_KEY, SHARED_KEY, SKIPPED_KEY, "link"}
    # every stage ran once per kernel / placement, and the summary says what happened
    assert executed(out) == ({f"{b}:{k}" for b in ("ir", "tune", "emit", "cc")
                              for k in (TINY_KEY, SHARED_KEY, SKIPPED_KEY)}
                             | {f"link:{r}" for r in (TINY, SKIPPED, SHARED1, SHARED2)})
    assert "4 AIRs: 2 kernels generated, 2 compiled, 3 .so placed, 1 skipped, 0 failed" in out
    assert "not cov.: expressions left to the prover's interpreter" in " ".join(out.split())   # the legend
    skipped_line = next(line for line in out.splitlines() if line.startswith(SKIPPED))
    assert "firstRow" in skipped_line and " skipped " in skipped_line
    # built from another directory (-d <tmp>): nothing lands in the checkout
    assert not (bk.REPO / "build" / "exps" / "pk").exists()
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- no-op
def test_noop_rebuild_runs_no_task_and_no_nvcc(built):
    kit = built
    pk_before, build_before = bk.tree(kit.pk), bk.tree(kit.build / TINY_KEY)
    for _ in range(3):      # any nvcc run fails the build (EXPS_ASSERT_NO_COMPILE)
        p = kit.doit(env={"EXPS_ASSERT_NO_COMPILE": "1"})
        # no task line; one line says so
        assert p.stdout == "4 AIRs up to date (3 .so placed, 1 skipped); nothing to do\n", p.stdout
        assert not bk.PROGRESS.search(p.stdout)
    # the CLI runs the same graph: also up to date
    p = kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher",
                kit.launcher, env={"EXPS_ASSERT_NO_COMPILE": "1"})
    assert not bk.PROGRESS.search(p.stdout), p.stdout
    assert kit.calls().n == 0
    assert bk.tree(kit.pk) == pk_before
    assert bk.tree(kit.build / TINY_KEY) == build_before


# --------------------------------------------------------------------------------- one AIR edited
def test_json_change_recompiles_only_that_kernel(built):
    kit = built
    others = {r: so_state(kit, r) for r in (SHARED1, SHARED2)}
    old_tiny = so_state(kit, TINY)
    bk.bump_q_number(kit.pk, TINY)
    p = kit.doit()
    c = kit.calls()
    # Q and the source hash changed -> Tiny's one device TU (and its table); the other kernel and
    # the launcher compile nothing
    assert sorted(c.compiles) == [f"{TINY_KEY}_q0_x0.cu"]
    assert c.links == [TINY_KEY]
    assert executed(p.stdout) == {f"ir:{TINY_KEY}", f"tune:{TINY_KEY}", f"emit:{TINY_KEY}",
                                  f"cc:{TINY_KEY}", f"link:{TINY}"}
    assert {r: so_state(kit, r) for r in (SHARED1, SHARED2)} == others   # untouched: mtime_ns + bytes
    assert so_state(kit, TINY)[2] != old_tiny[2]
    bk.assert_all_current(kit)


# ------------------------------------------------------------------------------ the toolchain
def _wrapped_host_compilers(d) -> str:
    """A dir of `gcc` and `g++` that run the real ones but say another version: PATH for them."""
    import os
    import shutil
    d.mkdir()
    for name in ("gcc", "g++"):
        real = shutil.which(name)
        (d / name).write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "{name} (wrapped) 99.1.0"; exit 0; }}\n'
                              f'exec {real} "$@"\n')
        (d / name).chmod(0o755)
    return f"{d}:{os.environ['PATH']}"


@pytest.mark.parametrize("change", ["nvcc_flags", "host_compiler"])
def test_a_toolchain_change_tunes_compiles_and_links_again(built, tmp_path, change):
    """What changes nvcc's output and is not in the sources: a variable nvcc reads
    (NVCC_APPEND_FLAGS, NVCC_PREPEND_FLAGS, NVCC_CCBIN) or the host compiler it calls (its
    `--version`; the link writes it into the .so). After either, every kernel is tuned and
    compiled again and every AIR linked again, from no object of the old toolchain (the object
    cache's key holds both); then the build is up to date for it, and going back rebuilds again."""
    kit = built
    env = ({"NVCC_APPEND_FLAGS": "-DEXPS_TEST_UNUSED=1"} if change == "nvcc_flags"
           else {"PATH": _wrapped_host_compilers(tmp_path / "wrap")})
    every = ({f"{b}:{k}" for b in ("tune", "cc") for k in (TINY_KEY, SHARED_KEY, SKIPPED_KEY)}
             | {f"link:{r}" for r in (TINY, SKIPPED, SHARED1, SHARED2)})
    p = kit.doit(env=env)
    assert {t for t in executed(p.stdout) if not t.startswith(("ir:", "emit:"))} == every, p.stdout
    c = kit.calls()
    assert sorted(c.compiles) == sorted([f"{TINY_KEY}_q0_x0.cu", f"{SHARED_KEY}_q0_x0.cu", "exps_xinv.cu",
                                         "exps_runtime.cpp"]), c.compiles
    assert sorted(c.links) == sorted([TINY_KEY, SHARED_KEY, SHARED_KEY])
    bk.assert_all_current(kit)
    p = kit.doit(env=env)
    assert p.stdout == "4 AIRs up to date (3 .so placed, 1 skipped); nothing to do\n", p.stdout
    kit.reset_log()
    p = kit.doit()
    assert {t for t in executed(p.stdout) if not t.startswith(("ir:", "emit:"))} == every, p.stdout
    assert kit.calls().links and not kit.calls().compiles      # the old toolchain's objects: cache hits


# --------------------------------------------------------------------------------- emitter version
def test_emitter_version_bump_reemits_all_recompiles_only_changed_tus(built, monkeypatch, capfd):
    """EMITTER_VERSION is patched in every codegen module that holds it and the build runs in this
    process (codegen.cli.run_doit, the graph exps-codegen runs): no test-only knob in the product."""
    import codegen
    from codegen.cli import run_doit, status_rows
    from codegen.emit import read_so_identity
    from codegen.tasks import Settings

    kit = built
    src = {k: bk.tree(kit.build / k / "src") for k in (TINY_KEY, SHARED_KEY)}
    new = codegen.EMITTER_VERSION + "+bump"
    for name, mod in list(sys.modules.items()):
        if (name == "codegen" or name.startswith("codegen.")) and hasattr(mod, "EMITTER_VERSION"):
            monkeypatch.setattr(mod, "EMITTER_VERSION", new)
    s = Settings(pk=kit.pk, build=kit.build, arch="90", chunk=0, launcher=kit.launcher)
    capfd.readouterr()
    assert run_doit(s, ["link"]) == 0
    out = capfd.readouterr().out
    # every stage whose output the emitter decides runs again: ir, tune (a new emitter's kernels
    # are tuned afresh, never given the old emitter's chunking), emit; cc and link where the
    # sources changed (the launch tables); the skipped AIR's kernel has no sources to compile
    keys = (TINY_KEY, SHARED_KEY, SKIPPED_KEY)
    assert executed(out) == ({f"{b}:{k}" for b in ("ir", "tune", "emit") for k in keys}
                             | {f"cc:{k}" for k in (TINY_KEY, SHARED_KEY)} | {f"link:{r}" for r in PLACED}), out
    c = kit.calls()
    # changed text: only the tables (the version is in their identity; compiled without the
    # launcher), the device TUs are cache hits: nothing through the launcher
    assert c.compiles == []
    assert sorted(c.links) == sorted([TINY_KEY, SHARED_KEY, SHARED_KEY])
    for k in (TINY_KEY, SHARED_KEY):
        after = bk.tree(kit.build / k / "src")
        assert set(after) == set(src[k])
        for name in after:
            if name.endswith("_abi.cpp"):
                assert new.encode() in after[name][2] and after[name][2] != src[k][name][2]
            else:   # same text, not even rewritten (the md5 check downstream stays quiet)
                assert after[name] == src[k][name], name
    for r in PLACED:
        assert read_so_identity(bk.so_path(kit.pk, r))[0] == new
    assert {r["air"]: r["state"] for r in status_rows(s)} == {**{r: "current" for r in PLACED},
                                                               SKIPPED: "skipped"}
    # and once more: a no-op (the lock was released, the state saved)
    assert run_doit(s, ["link"]) == 0
    assert not bk.PROGRESS.search(capfd.readouterr().out)


# --------------------------------------------------------------------------------- a cc-only failure
def test_a_failed_compile_after_a_template_change_leaves_no_so(ref, tmp_path, monkeypatch):
    """A template change reruns emit and cc only (the JSON, hence ir and tune, is as it was): cc is
    then the first stage that runs, and it removes the kernel's old `.so` before compiling. A
    compile that fails leaves no `.so` at all, the summary says so, and status says missing; the
    template restored, the next build places every `.so` again. The build runs from a copy of the
    checkout (bk.copy_repo), whose templates are the ones changed."""
    repo = bk.copy_repo(tmp_path / "repo")
    kit = bk.new_kit(tmp_path / "k", cache_from=ref.kit.cache)
    kit.dodo = repo / "dodo.py"
    monkeypatch.setenv("EXPS_CACHE_DIR", str(kit.cache))
    kit.doit()
    assert bk.so_files(kit.pk) == PLACED
    common = repo / "templates" / "gen_common.cuh"
    text = common.read_text()
    common.write_text(text + '\n#error "a template that does not compile"\n')
    p = kit.doit(check=False)
    assert p.returncode != 0
    ran = executed(p.stdout)
    assert not {t for t in ran if t.startswith(("ir:", "tune:"))}, ran
    assert {f"emit:{k}" for k in (TINY_KEY, SHARED_KEY)} <= ran
    assert bk.so_files(kit.pk) == set()                      # the old .so files are gone too
    assert "4 AIRs: 2 kernels generated, 0 compiled, 0 .so placed, 1 skipped, 3 failed" in p.stdout, p.stdout
    states, out = kit.status()
    assert states == {TINY: "missing", SHARED1: "missing", SHARED2: "missing", SKIPPED: "skipped"}, out
    common.write_text(text)
    kit.doit()
    bk.assert_all_current(kit)


def test_a_failed_compile_that_runs_alone_leaves_no_so(built):
    """cc as the only stage that runs (its objects' record gone; tune, emit and the templates as
    they were), and its compile fails (a launcher that fails): it removed the kernel's `.so` before
    compiling, so the AIRs of that kernel have none (their `.so` would still be current for their
    JSON, but a failed build leaves no `.so`: the summary and the disk agree); the other kernel's
    stay. The next build without that launcher places them again."""
    kit = built
    (kit.build / SHARED_KEY / "objs.json").unlink()
    p = kit.doit(launcher="false", check=False)
    assert p.returncode != 0
    assert executed(p.stdout) == {f"cc:{SHARED_KEY}"}, p.stdout
    assert bk.so_files(kit.pk) == {TINY}, p.stdout
    assert "4 AIRs: 0 kernels generated, 0 compiled, 1 .so placed (already current), 1 skipped, 2 failed" in p.stdout, \
        p.stdout
    states, out = kit.status()
    assert states == {TINY: "current", SHARED1: "missing", SHARED2: "missing", SKIPPED: "skipped"}, out
    kit.doit()
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- AIR turns skipped
@pytest.mark.parametrize("how", ["zi_boundary", "broken_expressions", "broken_starkinfo"])
def test_air_that_must_be_skipped_loses_its_so(built, how):
    kit = built
    originals = {s: (kit.pk / (TINY + s)).read_bytes() for s in (".starkinfo.json", ".expressionsinfo.json")}
    others = {r: so_state(kit, r) for r in (SHARED1, SHARED2)}
    if how == "zi_boundary":
        bk.make_zi_boundary_skip(kit.pk, TINY)
        words = ("boundaries", "firstRow")
    else:
        f = kit.pk / (TINY + (".expressionsinfo.json" if how == "broken_expressions" else ".starkinfo.json"))
        f.write_bytes(f.read_bytes()[: 200])
        words = (f.name, "invalid JSON")
    bad = how != "zi_boundary"                     # bad input: no .so, and the build exits 1
    p = kit.doit(check=not bad)
    assert p.returncode == (1 if bad else 0), p.stdout + p.stderr
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}                  # the old .so is gone
    assert {r: so_state(kit, r) for r in (SHARED1, SHARED2)} == others  # the others stay built
    assert kit.calls().compiles == [] and kit.calls().links == []
    line = next(x for x in p.stdout.splitlines() if x.startswith(TINY))   # the summary row
    assert (" bad input " if bad else " skipped ") in line and all(w in line for w in words), p.stdout
    assert ("2 .so placed (already current), 1 skipped, 0 failed, 1 bad input" if bad
            else "2 .so placed (already current), 2 skipped") in p.stdout
    states, out = kit.status()
    assert states == {TINY: "bad" if bad else "skipped", SKIPPED: "skipped", SHARED1: "current",
                      SHARED2: "current"}, out       # (Kit.status: the first word of the state)
    tline = next(x for x in out.splitlines() if x.startswith(TINY))
    assert all(w in tline for w in words), out
    # fixed again: Tiny is rebuilt (from the cache) and placed
    for s, data in originals.items():
        (kit.pk / (TINY + s)).write_bytes(data)
    kit.doit()
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- emit only
def test_doit_emit_writes_sources_only(kit):
    before = bk.tree(kit.pk)
    p = kit.doit("emit")
    assert bk.tree(kit.pk) == before
    assert kit.calls().n == 0
    assert not any(t.startswith(("cc:", "link:")) for t in executed(p.stdout))
    for k in (TINY_KEY, SHARED_KEY):
        assert sorted(x.name for x in (kit.build / k / "src").iterdir() if x.name not in COMMON_FILES) == kit.tus(k)
        assert not (kit.build / k / "obj").exists() and not (kit.build / k / "objs.json").exists()
    assert not (kit.build / "link").exists()


def test_emit_never_touches_a_built_key(built):
    kit = built
    bk.bump_q_number(kit.pk, TINY)         # Tiny's .so is stale now; emit must still leave it alone
    before = bk.tree(kit.pk)
    kit.doit("emit")                                    # same build dir: ir/tune/emit of Tiny re-run
    kit.doit("emit", build=kit.root / "other")          # a fresh build dir: every ir runs
    kit.cli("emit", str(kit.pk), *bk.CLI_ARGS, "--keep-dir", str(kit.root / "kept"))
    assert bk.tree(kit.pk) == before
    assert kit.calls().n == 0
    for d in (kit.root / "other", kit.root / "kept"):
        assert sorted(x.name for x in (d / TINY_KEY / "src").iterdir() if x.name not in COMMON_FILES) == kit.tus(TINY_KEY)
        assert not list(d.glob("*/obj"))
    # the build afterwards replaces the stale .so (cc removes it first, link places the new one)
    kit.doit()
    assert sorted(kit.calls().compiles) == [f"{TINY_KEY}_q0_x0.cu"]
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- clean
def test_doit_clean_removes_exactly_what_the_build_made(built):
    kit = built
    air_dir = bk.so_path(kit.pk, TINY).parent
    (air_dir / "notes.txt").write_text("not ours")
    (air_dir / "Other.exps.so").write_bytes(b"not ours either")    # no AIR of ours places it
    cache_before = bk.tree(kit.cache)
    inputs = {k: v for k, v in bk.tree(kit.pk).items() if k[: -len(".exps.so")] not in PLACED}
    kit.doit("clean")
    assert bk.tree(kit.pk) == {**inputs}                             # .so gone; JSON + foreign stay
    assert (air_dir / "notes.txt").exists() and (air_dir / "Other.exps.so").exists()
    left = sorted(p.name for p in kit.build.rglob("*") if p.is_file())
    assert all(n.startswith(".doit.db") or n == ".lock" for n in left), left
    assert bk.tree(kit.cache) == cache_before                        # the object cache is not ours
    (air_dir / "Other.exps.so").unlink()
    kit.doit()                                                       # and it builds again
    assert kit.calls().compiles == []                                # (from the cache)
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- parallel
def test_parallel_build_same_results(ref, tmp_path, monkeypatch):
    """`doit -n 2` (doit's default process pool), cold cache: the same calls and the same bytes. (One
    exception: the generic inverse kernel's TU, one text in both kernels, is compiled once per process
    that misses it in the cache while the other compiles it: the object cache serializes a key's
    compiles within a process only, so two concurrent cc tasks may both compile it.)"""
    kit = bk.new_kit(tmp_path)
    monkeypatch.setenv("EXPS_CACHE_DIR", str(kit.cache))
    kit.doit("-n", "2")
    c, r = kit.calls(), ref.kit.calls()
    own = lambda names: [n for n in names if not n.endswith("_xinv.cu")]   # noqa: E731
    assert sorted(own(c.compiles)) == sorted(own(r.compiles)) and sorted(c.links) == sorted(r.links)
    assert 1 <= len(c.compiles) - len(own(c.compiles)) <= 2
    assert bk.so_files(kit.pk) == PLACED
    for rel in PLACED:
        assert so_state(kit, rel)[2] == so_state(ref.kit, rel)[2], rel
    bk.assert_all_current(kit)
    kit.reset_log()
    p = kit.doit("-n", "2", env={"EXPS_ASSERT_NO_COMPILE": "1"})
    assert p.stdout == "4 AIRs up to date (3 .so placed, 1 skipped); nothing to do\n" and kit.calls().n == 0


def test_cli_build_jobs(kit):
    """`exps-codegen build -j 2` (thread pool) from the warm cache."""
    kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher", kit.launcher,
            "-j", "2")
    c = kit.calls()
    assert c.compiles == [] and sorted(c.links) == sorted([TINY_KEY, SHARED_KEY, SHARED_KEY])
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- embedding
def test_pipeline_dodo_yields_the_tasks(kit):
    """Embedded in a pipeline's dodo.py that has tasks of its own named `link` and `emit`: our
    stages live under the `exps-` namespace (and `doit exps` builds them all), so both coexist."""
    pipe = kit.root / "pipeline"
    pipe.mkdir()
    (pipe / "dodo.py").write_text(textwrap.dedent(f"""\
        from codegen.tasks import Settings, exps_tasks

        def task_link():
            \"\"\"the pipeline's own link step\"\"\"
            return {{"actions": ["echo pipeline-link > link.txt"], "targets": ["link.txt"]}}

        def task_emit():
            \"\"\"the pipeline's own emit step\"\"\"
            return {{"actions": ["echo pipeline-emit > emit.txt"], "targets": ["emit.txt"]}}

        def task_kernels():
            \"\"\"CUDA kernels of the provingKey\"\"\"
            yield from exps_tasks(Settings(pk={str(kit.pk)!r}, build="build/exps", arch="90", chunk=0,
                                           launcher={kit.launcher!r}))
        """))
    listed = bk.run([sys.executable, "-m", "doit", "list"], pipe, kit.env(), 600, kit.root)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    names = {x.split()[0] for x in listed.stdout.splitlines() if x.strip()}
    assert {"link", "emit", "exps", "exps-ir", "exps-tune", "exps-emit", "exps-cc", "exps-link"} <= names, names
    p = bk.run([sys.executable, "-m", "doit"], pipe, kit.env(), 600, kit.root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (pipe / "link.txt").read_text() == "pipeline-link\n" and (pipe / "emit.txt").exists()
    assert bk.so_files(kit.pk) == PLACED
    assert (pipe / "build" / "exps" / TINY_KEY / "objs.json").exists()
    kit.build = pipe / "build" / "exps"
    bk.assert_all_current(kit)
    p = bk.run([sys.executable, "-m", "doit", "exps"], pipe, kit.env(EXPS_ASSERT_NO_COMPILE=1), 600, kit.root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not bk.PROGRESS.search(p.stdout), p.stdout      # up to date: no stage ran


# --------------------------------------------------------------------------------- status
def test_status_current_stale_missing_skipped(built):
    kit = built
    states, _ = kit.status()
    assert states == {TINY: "current", SKIPPED: "skipped", SHARED1: "current", SHARED2: "current"}
    bk.bump_q_number(kit.pk, TINY)                 # edited, not rebuilt
    bk.so_path(kit.pk, SHARED1).unlink()           # deleted
    states, out = kit.status()
    assert states == {TINY: "stale", SKIPPED: "skipped", SHARED1: "missing", SHARED2: "current"}, out
    assert "1 current, 1 stale, 1 missing, 1 skipped" in out
    p = kit.cli("status", str(kit.pk), "--build-dir", str(kit.build), check=False)
    assert p.returncode == 1     # stale, missing
    kit.doit()
    assert sorted(kit.calls().links) == [TINY_KEY, SHARED_KEY]   # Tiny rebuilt, Shared1 re-placed
    bk.assert_all_current(kit)


# --------------------------------------------------------------------------------- original flags
def test_original_tool_flags(kit):
    # (a launcher given by a path relative to the working directory: nvcc runs elsewhere)
    p = kit.cli("--proving-key", str(kit.pk), "--arch", "90", "--chunk", "0", "--stark-src", "/nonexistent",
                "--launcher", "./launcher.sh")
    assert len(kit.calls().links) == 3
    assert "--stark-src is ignored" in p.stderr
    assert bk.so_files(kit.pk) == PLACED
    # default build dir: $EXPS_BUILD_ROOT/<key name>-<digest> (Kit.env sets the root), the same
    # one `doit pk=` and `status` find; nothing lands in the working directory
    (default,) = (kit.root / "builds").iterdir()
    assert re.fullmatch(r"pk-[0-9a-f]{12}", default.name)
    assert not (kit.root / "build").exists()
    kit.build = default
    bk.assert_all_current(kit)

    before = bk.tree(kit.pk)
    kit.reset_log()
    kept = kit.root / "kept"
    p = kit.cli("--proving-key", str(kit.pk), "--emit-only", "--keep-dir", str(kept), "--arch", "90",
                "--chunk", "0", "--launcher", kit.launcher)
    assert bk.tree(kit.pk) == before and kit.calls().n == 0
    for k in (TINY_KEY, SHARED_KEY):       # (kept: a copy of the sources; the manifest is in the build dir)
        files = bk._load(default / k / "manifest.json")["files"]
        assert sorted(x.name for x in (kept / k / "src").iterdir() if x.name not in COMMON_FILES) == sorted(files)
    assert not list(kept.glob("*/obj")) and not (kept / "link").exists()


def test_gen_exps_spellings_and_flat_keep_dir(kit):
    """pil2-proofman's spellings: `gen-exps --proving-key` (proofman-cli) and `gen-exps -p
    --exps-arch --exps-chunk --exps-stark-src` (proofman-setup); `--keep-dir` also keeps the
    original's flat layout (gen_<kernel>_*.cu, gen_common.cuh, gen.log: name, base, sym, slots)."""
    keep = kit.root / "keep"
    p = kit.cli("gen-exps", "-p", str(kit.pk), "--exps-arch", "90", "--exps-chunk", "0",
                "--exps-stark-src", "/nonexistent", "--keep-dir", str(keep), "--launcher", kit.launcher)
    assert "--stark-src is ignored" in p.stderr
    assert bk.so_files(kit.pk) == PLACED
    (kit.build,) = (kit.root / "builds").iterdir()     # the default build dir; keep/ gets copies
    bk.assert_all_current(kit)
    flat = sorted(x.name for x in keep.iterdir() if x.is_file() and not x.name.startswith((".", "report.")))
    assert flat == sorted(["gen.log", "gen_common.cuh", "exps_abi.h", "exps_runtime.cpp", "gen_exps_xinv.cu"]
                          + [f"gen_{k}_{t}" for k in (TINY_KEY, SHARED_KEY)
                             for t in ("q0_x0.cu", "abi.cpp")]), flat
    assert (keep / "gen.log").read_text().splitlines() == [
        f"Tiny, {TINY}, {TINY_KEY}, 0",
        f"Shared, {SHARED1}, {SHARED_KEY}, 0",
        f"Shared, {SHARED2}, {SHARED_KEY}, 0"]
    assert (keep / f"gen_{TINY_KEY}_q0_x0.cu").read_bytes() == \
        (keep / TINY_KEY / "src" / f"{TINY_KEY}_q0_x0.cu").read_bytes()
    # the flat sources stand alone: they compile with only the flat headers beside them
    for name in (f"gen_{TINY_KEY}_q0_x0.cu", f"gen_{TINY_KEY}_abi.cpp", "exps_runtime.cpp"):
        gxx = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DGL64_PARTIALLY_REDUCED", "-DEXPS_HOSTCHECK",
                              "-I", str(keep), "-x", "c++", str(keep / name)], capture_output=True, text=True)
        assert gxx.returncode == 0, gxx.stderr
    # proofman-cli's spelling, sources only
    before = bk.tree(kit.pk)
    kept = kit.root / "kept"
    kit.cli("gen-exps", "--proving-key", str(kit.pk), "--arch", "90", "--chunk", "0", "--emit-only",
            "--keep-dir", str(kept))
    assert bk.tree(kit.pk) == before
    assert len((kept / "gen.log").read_text().splitlines()) == 3 and (kept / f"gen_{TINY_KEY}_q0_x0.cu").exists()


def test_settings_launcher_path_is_absolute(tmp_path, monkeypatch):
    from codegen.tasks import Settings
    monkeypatch.chdir(tmp_path)
    assert Settings(launcher="./wrap.sh -q").launcher_argv() == [str(tmp_path / "wrap.sh"), "-q"]
    assert Settings(launcher="ccache").launcher_argv() == ["ccache"]           # a command on PATH
    assert Settings(launcher="/opt/x/sccache").launcher_argv() == ["/opt/x/sccache"]


# --------------------------------------------------------------------------------- whole sample
@pytest.mark.slow
def test_whole_sample_first_build_and_noop(ref, tmp_path, monkeypatch):
    """All six AIRs (Large: 5,400 Q ops), cold cache, `-n 2`; then a no-op under the compile guard.
    Q in chunks of 256 ops: Large as one kernel keeps ptxas busy for more than 10 minutes."""
    kit = bk.new_kit(tmp_path, airs=bk.ALL)
    kit.chunk = 256
    monkeypatch.setenv("EXPS_CACHE_DIR", str(kit.cache))
    p = kit.doit("-n", "2", timeout=1200)
    placed = {bk.TINY, bk.MEDIUM, bk.LARGE, SHARED1, SHARED2}
    assert bk.so_files(kit.pk) == placed
    keys = sorted({bk.KEY_OF[r] for r in placed})
    c = kit.calls()
    # every device TU of a kernel's own once, and the bounded twin of those whose chunk kernels can
    # take a launch bound (compiled from source here: the launcher keeps no PTX) once; the generic
    # inverse kernel's TU (the same text in all four kernels) and the generic launcher once each
    # (twice when two cc tasks missed it at once)
    twins = collections.Counter(c.twins)
    device = collections.Counter(t for t in c.compiles if t != "exps_runtime.cpp" and not t.endswith("_xinv.cu"))
    device -= twins
    assert sorted(device.elements()) == sorted(t for k in keys for t in kit.tus(k) if t.endswith(".cu") and "_xinv" not in t)
    assert twins and set(twins) <= set(device) and set(twins.values()) == {1}, twins
    assert all("exps_xinv.cu" in kit.tus(k) for k in keys)
    assert 1 <= sum(t.endswith("_xinv.cu") for t in c.compiles) <= 2
    assert 1 <= c.compiles.count("exps_runtime.cpp") <= 2
    assert sorted(c.links) == sorted(bk.KEY_OF[r] for r in placed)
    assert "6 AIRs: 4 kernels generated, 4 compiled, 5 .so placed, 1 skipped, 0 failed" in p.stdout
    bk.assert_all_current(kit, expect_placed=placed)
    kit.reset_log()
    p = kit.doit(env={"EXPS_ASSERT_NO_COMPILE": "1"})
    assert p.stdout == "6 AIRs up to date (5 .so placed, 1 skipped); nothing to do\n" and kit.calls().n == 0
