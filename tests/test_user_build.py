"""The user's build, every line true: what `exps-codegen` and `doit` print and exit with, through
the real commands in subprocesses (output after a parallel run, progress of every long stage,
--keep-dir, a read-only key, bad input, one Q ops, a summary of this run, status exit codes,
nvcc in CUDA's install dirs, per-command flags, the report, README's pipeline example)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import buildkit as bk
from buildkit import SHARED1, SHARED2, SHARED_KEY, SKIPPED, TINY, TINY_KEY

needs_nvcc = pytest.mark.requires("nvcc")
PLACED = {TINY, SHARED1, SHARED2}


@pytest.fixture
def kit(tmp_path, tmp_path_factory) -> bk.Kit:
    """The small key (Tiny, Skipped, the Shared pair) with a warm object cache."""
    ref = bk.reference(tmp_path_factory)
    return bk.new_kit(tmp_path / "k", cache_from=ref.kit.cache)


def _build(kit: bk.Kit, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    return kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher", kit.launcher,
                   *args, check=check, env=env)


def _doit(kit: bk.Kit, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    return kit.doit(*args, check=check, env=env)


def _rows(out: str) -> dict[str, list[str]]:
    """Rows of a summary / status / verify table by AIR (whitespace-split)."""
    return {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith("synth/")}


def _count_line(out: str) -> str:
    (line,) = [x for x in out.splitlines() if re.match(r"^\d+ AIRs", x)]
    return line


# ---------------------------------------------------------------------------- output after -j 2
@needs_nvcc
def test_verify_rebuild_prints_its_table_and_verdict_after_a_parallel_run(kit) -> None:
    _build(kit, "-j", "2")
    args = ("verify", str(kit.pk), "--rebuild", "--arch", "90", "--chunk", "0", "-j", "2")
    p = kit.cli(*args)
    rows = {r: " ".join(v[1:]) for r, v in _rows(p.stdout).items()}
    assert set(rows) == {TINY, SKIPPED, SHARED1, SHARED2}, p.stdout
    assert all(rows[r].startswith("identical (sha256 ") for r in PLACED), rows
    assert rows[SKIPPED] == "no .so (skipped both times)"
    assert p.stdout.splitlines()[-1] == "4 AIRs, 0 differ"
    so = bk.so_path(kit.pk, TINY)          # a poisoned key: one byte of a placed .so
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    so.write_bytes(bytes(data))
    p = kit.cli(*args, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert _rows(p.stdout)[TINY][1] == "DIFFERS:" and p.stdout.splitlines()[-1] == "4 AIRs, 1 differ", p.stdout


@needs_nvcc
def test_emit_says_where_the_sources_are_after_a_parallel_run(kit) -> None:
    p = kit.cli("emit", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "-j", "2")
    assert p.stdout.splitlines()[-1] == f"sources in {kit.build}/<kernel>/src/"
    keep = kit.root / "keep"
    p = kit.cli("emit", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "-j", "2", "--keep-dir", str(keep))
    assert p.stdout.splitlines()[-1] == f"sources in {keep}/<kernel>/src/"
    for k in (TINY_KEY, SHARED_KEY):
        assert sorted(x.name for x in (keep / k / "src").iterdir()) == \
            sorted(x.name for x in (kit.build / k / "src").iterdir())
    assert sorted(x.name for x in keep.iterdir()) == sorted([TINY_KEY, SHARED_KEY])


# ---------------------------------------------------------------------------- gen-exps --keep-dir
@needs_nvcc
def test_gen_exps_keep_dir_gets_the_sources_and_the_build_dir_stays_the_default(kit) -> None:
    keep = kit.root / "keep"
    p = kit.cli("gen-exps", "-p", str(kit.pk), "--exps-arch", "90", "--exps-chunk", "0", "--keep-dir", str(keep),
                "--launcher", kit.launcher, "-j", "2")
    (build,) = (kit.root / "builds").iterdir()          # the default build dir ($EXPS_BUILD_ROOT/...)
    assert p.stdout.splitlines()[-1] == (f"kept: {keep}/<kernel>/src/ and {keep}/gen_<kernel>_*.cu, "
                                         "gen_common.cuh, gen.log (3 AIRs)"), p.stdout
    assert bk.so_files(kit.pk) == PLACED
    assert sorted(x.name for x in keep.iterdir() if x.is_dir()) == sorted([TINY_KEY, SHARED_KEY])
    name = f"{TINY_KEY}_q0_x0.cu"
    assert (keep / TINY_KEY / "src" / name).read_bytes() == (build / TINY_KEY / "src" / name).read_bytes()
    assert (keep / f"gen_{name}").read_bytes() == (build / TINY_KEY / "src" / name).read_bytes()
    assert not (keep / "link").exists() and not list(keep.glob("*/obj")) and not list(keep.glob("*.json"))
    st = kit.cli("status", str(kit.pk))
    assert st.stdout.splitlines()[-1] == f"3 current, 0 stale, 0 missing, 1 skipped  (build dir {build})"
    c = kit.cli("clean", str(kit.pk))
    assert sorted(c.stdout.splitlines()) == sorted(
        [f"removed {bk.so_path(kit.pk, r)}" for r in PLACED] + [f"removed build dir {build}"])
    assert bk.so_files(kit.pk) == set() and not build.exists() and keep.is_dir()


# ---------------------------------------------------------------------------- progress
@needs_nvcc
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_cc_and_link_say_what_runs_while_they_run(tmp_path, front) -> None:
    """A slow compiler (every nvcc run sleeps first) and a short EXPS_HEARTBEAT_S: the compile and
    the link of Tiny each print their progress line while they run."""
    kit = bk.new_kit(tmp_path / "k", airs=(TINY,))
    slow = tmp_path / "slow" / "launcher.sh"
    slow.parent.mkdir()
    slow.write_text(f"#!/bin/sh\nsleep 1\nexec {kit.launcher} \"$@\"\n")
    slow.chmod(0o755)
    env = {"EXPS_HEARTBEAT_S": "0.2"}
    if front == "cli":
        p = kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher", str(slow),
                    env=env)
    else:
        p = kit.doit(launcher=str(slow), env=env)
    cc = re.compile(rf"^    \.\.\. cc {TINY_KEY} \(2 device TUs, sm_90\): "
                    r"(\d of 2 device TUs compiled|compiling the launch table and the launcher \(host C\+\+\)), "
                    r"\d+ s elapsed$", re.M)
    link = re.compile(rf"^    \.\.\. link {TINY}: linking Tiny\.exps\.so \(nvcc\), \d+ s elapsed$", re.M)
    assert cc.search(p.stderr) and link.search(p.stderr), p.stderr
    assert bk.so_files(kit.pk) == {TINY}


# ---------------------------------------------------------------------------- a read-only key
def _read_only(pk: Path, argv: list[str]) -> list[str]:
    """argv run in a mount namespace where the key is a read-only bind mount of itself."""
    return ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(pk), *argv]


@pytest.fixture
def can_mount(tmp_path) -> None:
    d = tmp_path / "probe"
    d.mkdir()
    if shutil.which("unshare") is None or subprocess.run(
            _read_only(d, ["sh", "-c", f"! touch {d}/x 2>/dev/null"]), capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here (unshare -m and a read-only bind mount need root)")


@needs_nvcc
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_a_read_only_key_is_one_line(tmp_path, can_mount, front) -> None:
    kit = bk.new_kit(tmp_path / "k")
    argv = ([*bk.exps_codegen(), "build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build)]
            if front == "cli" else kit.doit_argv())
    p = bk.run(_read_only(kit.pk, argv), kit.root, kit.env(), 300, kit.root)
    first = kit.pk / "synth/Basic/airs/Skipped/air"
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout == ""
    assert p.stderr == (f"exps-codegen: error: cannot place the .so files: {first} (and 3 other folder(s) of "
                        "it) is on a read-only file system; build a writable copy of the provingKey, or write "
                        "the sources only (exps-codegen emit / doit emit)\n")
    assert not kit.build.exists() and kit.calls().n == 0


# ---------------------------------------------------------------------------- bad input
@needs_nvcc
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_bad_input_builds_the_rest_and_exits_1_unless_allowed(kit, front) -> None:
    run = _build if front == "cli" else _doit
    run(kit)
    (kit.pk / (TINY + ".expressionsinfo.json")).write_text('{"broken')
    p = run(kit, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    rows = _rows(p.stdout)
    assert rows[TINY][2:5] == ["0", "bad", "input"], p.stdout       # (no Q ops, chunks, ...: not cov. 0)
    why = (f"bad input: {TINY}.expressionsinfo.json: <root>: invalid JSON: Unterminated string starting at: "
           "line 1 column 2 (char 1)")
    assert f"FAILED link:{TINY}: {TINY}: {why}\n" in p.stdout
    assert rows[SKIPPED][3] == "skipped" and rows[SKIPPED][5] == f"{SKIPPED}.starkinfo.json:", rows[SKIPPED]
    assert _count_line(p.stdout).startswith(
        "4 AIRs: 0 kernels generated, 0 compiled, 2 .so placed (already current), 1 skipped, 0 failed, 1 bad input;")
    assert p.stdout.splitlines()[-1].startswith("ERROR: 1 AIR(s) have bad input and get no .so")
    assert str(kit.pk) not in p.stdout                       # paths in the key relative to it
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}
    rep = json.loads((kit.build / "report.json").read_text())
    assert {a["air"]: a["reason"] for a in rep["airs"]}[TINY] == why
    assert rep["totals"]["bad_input"] == 1 and rep["totals"]["skipped"] == 1
    st = kit.cli("status", str(kit.pk), "--build-dir", str(kit.build), check=False)
    assert st.returncode == 1 and _rows(st.stdout)[TINY][1:3] == ["bad", "input"], st.stdout
    p = run(kit, "--allow-bad-input") if front == "cli" else run(kit, "allow_bad_input=1")
    assert "1 bad input" in p.stdout and "ERROR" not in p.stdout
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}


EMBEDDED = """from codegen.tasks import Settings, exps_tasks

def task_kernels():
    yield from exps_tasks(Settings(pk={pk!r}, build={build!r}, arch="90", chunk=0, allow_bad_input={allow}))
"""


@needs_nvcc
def test_an_embedded_build_fails_on_bad_input_whatever_an_earlier_run_allowed(kit) -> None:
    """A pipeline's own dodo.py (doit's own reporter, our tasks; `--continue` so that the other AIRs
    build past a failure): an AIR of bad input fails its link task, so `doit exps` exits non-zero; a
    run that allows bad input passes; a later run that does not allow it fails again (the link task
    is not up to date for it), with no compile."""
    (kit.pk / (TINY + ".expressionsinfo.json")).write_text('{"broken')

    def embedded(allow: bool) -> subprocess.CompletedProcess:
        dodo = kit.root / f"embed_{allow}.py"
        dodo.write_text(EMBEDDED.format(pk=str(kit.pk), build=str(kit.build), allow=allow))
        return bk.run([sys.executable, "-m", "doit", "-f", str(dodo), "-d", str(kit.root), "--continue", "exps"], kit.root,
                      kit.env(PYTHONPATH=str(bk.REPO)), 600, kit.root)
    first = embedded(False)
    assert first.returncode != 0 and "Traceback" not in first.stdout + first.stderr, first.stdout + first.stderr
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}
    assert embedded(True).returncode == 0
    kit.reset_log()
    again = embedded(False)
    assert again.returncode != 0 and "bad input" in again.stdout + again.stderr, again.stdout + again.stderr
    assert kit.calls().compiles == [] and bk.so_files(kit.pk) == {SHARED1, SHARED2}


# ---------------------------------------------------------------------------- Q ops, cap, status
@needs_nvcc
def test_one_q_ops_and_status_after_a_capped_build(kit) -> None:
    """Q ops is Q's operations as the JSON gives them (Shared: 155, 154 after the IR passes) in the
    summary, in `verify` and in the cap's reason; `cap` decides which AIRs get a kernel, not what
    it computes, so a plain `status` after a capped build says current; exit 0 iff every AIR is
    current or skipped by design."""
    p = kit.cli("gen-exps", "-p", str(kit.pk), "--exps-arch", "90", "--exps-chunk", "0", "--exps-cap", "100",
                "--launcher", kit.launcher)
    rows = _rows(p.stdout)
    assert rows[SHARED1][3] == "skipped", p.stdout
    assert " ".join(rows[SHARED1][5:]) == "Q has 155 ops > cap 100 (the cap= / --cap limit)", p.stdout
    st = kit.cli("status", str(kit.pk))
    assert {r: v[1] for r, v in _rows(st.stdout).items()} == {
        TINY: "current", SKIPPED: "skipped", SHARED1: "skipped", SHARED2: "skipped"}, st.stdout
    p = kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--launcher", kit.launcher)
    assert _rows(p.stdout)[SHARED1][2] == "155" and _rows(p.stdout)[TINY][2] == "39", p.stdout
    assert "Q ops: operations of the quotient (Q) expression as the JSON gives them" in p.stdout
    v = kit.cli("verify", str(kit.pk), "--rows", "256")
    assert _rows(v.stdout)[SHARED1][2] == "155" and _rows(v.stdout)[TINY][2] == "39", v.stdout
    assert kit.cli("status", str(kit.pk)).returncode == 0
    bk.so_path(kit.pk, SHARED2).unlink()
    st = kit.cli("status", str(kit.pk), check=False)
    assert st.returncode == 1 and _rows(st.stdout)[SHARED2][1] == "missing", st.stdout
    h = kit.cli("status", "--help")
    assert "exit status: 0 when every AIR is current or skipped by design" in " ".join(h.stdout.split())


# ---------------------------------------------------------------------------- a summary of this run
@needs_nvcc
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_the_summary_counts_what_this_run_did(kit, front) -> None:
    run = _build if front == "cli" else _doit
    p = run(kit)
    assert _count_line(p.stdout).startswith("4 AIRs: 2 kernels generated, 2 compiled, 3 .so placed, 1 skipped, 0 failed;")
    assert re.search(rf"^\[\d+/\d+\] link:{TINY}  \(at \d+\.\d s\)$", p.stdout, re.M), p.stdout
    bk.so_path(kit.pk, TINY).unlink()
    kit.reset_log()
    p = run(kit)
    assert kit.calls().compiles == [] and kit.calls().links == [TINY_KEY]
    assert _count_line(p.stdout).startswith(
        "4 AIRs: 0 kernels generated, 0 compiled, 3 .so placed (1 linked, 2 already current), 1 skipped, 0 failed;")
    legend = p.stdout.splitlines()[p.stdout.splitlines().index(_count_line(p.stdout)) + 1:]
    assert legend[0].startswith("Q ops: ") and all(len(x) <= 100 for x in legend), legend


# ---------------------------------------------------------------------------- nvcc
def _path_without_nvcc(tmp: Path) -> str:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    for tool in ("doit", "exps-codegen"):
        if exe := shutil.which(tool):
            (bindir / tool).symlink_to(exe)
    (bindir / "python3").symlink_to(sys.executable)
    path = f"{bindir}:/usr/bin:/bin"
    assert shutil.which("nvcc", path=path) is None
    return path


@needs_nvcc
def test_nvcc_in_cudas_install_dir_is_found_without_path(kit) -> None:
    from codegen.build.toolchain import find_nvcc
    real = find_nvcc()
    env = {"PATH": _path_without_nvcc(kit.root)}
    cuda = kit.root / "opt"
    (cuda / "cuda-12.9" / "bin").mkdir(parents=True)
    (cuda / "cuda-12.9" / "bin" / "nvcc").write_text("#!/bin/sh\nexit 1\n")     # older: not taken
    (cuda / "cuda-12.9" / "bin" / "nvcc").chmod(0o755)
    (cuda / "cuda-13.0" / "bin").mkdir(parents=True)
    (cuda / "cuda-13.0" / "bin" / "nvcc").symlink_to(real)
    for var in ("CUDA_HOME", "CUDA_PATH", "EXPS_NVCC"):
        os.environ.get(var) and env.update({var: ""})
    p = _build(kit, env={**env, "EXPS_CUDA_DIRS": f"{cuda}/cuda-*"})
    assert bk.so_files(kit.pk) == PLACED and "nvcc not found" not in p.stderr
    if not os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        pytest.skip("no CUDA toolkit in /usr/local/cuda: its default install dir is not checked here")
    bk.so_path(kit.pk, TINY).unlink()
    _build(kit, env=env)                                 # the default dirs: /usr/local/cuda first
    assert bk.so_files(kit.pk) == PLACED


def test_installed_nvcc_candidates_newest_first(tmp_path, monkeypatch) -> None:
    from codegen.build import knobs
    from codegen.build import toolchain as tc
    for v in ("cuda-12.4", "cuda-13.0", "cuda-12.10"):
        (tmp_path / v).mkdir()
    monkeypatch.setenv("EXPS_CUDA_DIRS", f"{tmp_path}/cuda:{tmp_path}/cuda-*")
    assert list(tc._installed_nvcc_candidates()) == [
        tmp_path / v / "bin" / "nvcc" for v in ("cuda-13.0", "cuda-12.10", "cuda-12.4")]
    monkeypatch.delenv("EXPS_CUDA_DIRS")
    assert knobs.read().cuda_dirs == ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda")


# ---------------------------------------------------------------------------- --help
def test_each_command_offers_its_own_flags(tmp_path) -> None:
    cli = bk.exps_codegen()
    env = {**os.environ, "EXPS_BUILD_ROOT": str(tmp_path / "builds")}

    def flags(*cmd: str) -> set[str]:
        p = subprocess.run([*cli, *cmd, "--help"], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 0, p.stderr
        heads = [re.split(r"\s{2,}", ln.strip())[0] for ln in p.stdout.split("options:")[1].splitlines()
                 if ln.startswith("  -")]           # the flag column of each option line
        return {f for h in heads for f in re.findall(r"(?<![\w-])(--[a-z][a-z-]+|-[a-z])\b", h)} - {"-h", "--help"}

    assert flags("clean") == flags("status") == flags("report") == {"--build-dir"}
    assert flags("build") == {"--arch", "--cap", "--chunk", "--no-chunk-bounds", "--launcher", "--build-dir",
                              "--compile-timeout", "-j", "--jobs", "--allow-bad-input", "-v", "--verbose"}
    assert "--compile-timeout" not in flags("emit") and "--keep-dir" in flags("emit")
    for cmd in (["clean", str(tmp_path), "--compile-timeout", "5"], ["report", str(tmp_path), "-j", "2"]):
        p = subprocess.run([*cli, *cmd], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 2 and "unrecognized arguments" in p.stderr, p.stderr
    top = subprocess.run([*cli, "--help"], capture_output=True, text=True, env=env, timeout=60).stdout
    assert top.splitlines()[2].startswith("exps-codegen: build the CUDA kernels of a PIL2 provingKey"), top
    assert re.search(r"^    gen-exps +the original tool's flags", top, re.M), top


# ---------------------------------------------------------------------------- the report
def test_report_marks_one_chosen_probe_and_unprobed_kernels() -> None:
    from codegen.build import report
    k = {"key": "k1", "q_ops": 155, "ops_run": 154, "max_live": 9, "chunks": 1, "slots": 0, "exprs": 5,
         "not_covered": 1, "chunking": {"how": "probed", "arch": 90, "ops_per_chunk": 0, "min_blocks": 0},
         "probes": [{"ops_per_chunk": 0, "min_blocks": 0, "n_chunks": 1, "slots": 0, "regs": [128], "spills": 0,
                     "cost": 287.0},
                    {"ops_per_chunk": 0, "min_blocks": 3, "n_chunks": 1, "slots": 0, "regs": [80], "spills": 456,
                     "cost": None}],
         "regs_per_chunk": [128], "bounded": {}, "spill_bytes": 0, "tus": 2, "cache_hits": 0, "compiled": True,
         "stage_seconds": {"ir": 0.1, "tune": 1.0, "emit": 0.1, "cc": 2.0}, "skip": ""}
    k2 = {**k, "key": "k2", "probes": [], "chunking": {**k["chunking"], "how": report._how({"how": "probed"})}}
    rep = {"format": 1, "tool": "exps-codegen", "emitter_version": "x", "pk": "pk", "build_dir": "b",
           "wall_s": None, "cpu_s": None, "totals": {"airs": 1, "kernels_generated": 1, "compiled": 1, "linked": 1,
                                                     "placed": 1, "skipped": 0, "bad_input": 0, "failed": 0,
                                                     "tus": 2, "cache_hits": 0},
           "airs": [], "kernels": [k, k2]}
    page = report.render_html(rep)
    probes = page.split("<h2>Autotune probes</h2>")[1].split("</table>")[0]
    assert probes.count("<td>yes</td>") == 1 and probes.count("ruled out: spills") == 1
    assert "<td>not probed: one kernel (sm_90)</td>" in page and "<td>probed: one kernel (sm_90)</td>" in page


@needs_nvcc
def test_a_failed_build_s_report_says_why(tmp_path, tmp_path_factory) -> None:
    ref = bk.reference(tmp_path_factory)
    kit = bk.new_kit(tmp_path / "k", cache_from=ref.kit.cache, exclude=(TINY_KEY,))
    bad = bk.write_launcher(kit.root / "bad.sh", kit.log, fault="fail", kind="cc", match=f"{TINY_KEY}_q0")
    p = kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher", bad, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    rep = json.loads((kit.build / "report.json").read_text())
    why = {a["air"]: a["reason"] for a in rep["airs"]}[TINY]
    assert why.startswith(f"cc failed: compile of kernel {TINY_KEY} (AIRs: {TINY}) failed: "), why
    assert "see the error above" not in (kit.build / "report.html").read_text() + p.stdout
    assert re.search(rf"^FAILED cc:{TINY_KEY}: compile of kernel {TINY_KEY} ", p.stdout, re.M), p.stdout
    assert bk.so_files(kit.pk) == {SHARED1, SHARED2}


# ---------------------------------------------------------------------------- README's pipeline
@needs_nvcc
def test_readme_pipeline_example_makes_the_task_it_names(tmp_path) -> None:
    text = (bk.REPO / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "exps_tasks" in b]
    (target,) = re.findall(r"\(`doit (\w+)`\)", text.split(block)[1][:600])
    pk = bk.copy_key(tmp_path / "build" / "provingKey", (TINY,))
    (tmp_path / "dodo.py").write_text(block.replace('arch="90"', 'arch="90", chunk=0'))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
    env.update({"EXPS_BUILD_ROOT": str(tmp_path / "builds"), "EXPS_CACHE_DIR": str(tmp_path / "cache")})
    p = subprocess.run([sys.executable, "-m", "doit", "list"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and target in p.stdout.split(), p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "doit", target], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert bk.so_files(pk) == {TINY}
