"""exps-codegen: build the CUDA kernels of a PIL2 provingKey's expressions, one <base>.exps.so per AIR.

    exps-codegen build PK        build and place every <base>.exps.so of the provingKey
    exps-codegen emit PK         sources only (--keep-dir D), the provingKey untouched
    exps-codegen status PK       per AIR: current / stale / missing / skipped / bad input / refused
    exps-codegen verify PK       host check: generated kernels (g++) vs the numpy oracle
    exps-codegen report PK       write <build>/report.json and report.html from the build dir
    exps-codegen clean PK        remove what the build made (the .so files and the build dir)
    exps-codegen gpucheck PK     GPU check: the placed .so files vs the numpy oracle (needs CuPy)
    exps-codegen sample DIR      write the embedded sample provingKey (6 AIRs) into a new or empty DIR
    exps-codegen gen-exps ...    the original tool's flags (`exps-codegen gen-exps --help`)

The original tool's flags still work, with pil2-proofman's spellings: `exps-codegen [gen-exps]
--proving-key PK [--arch A] [--cap N] [--chunk N] [--keep-dir D] [--emit-only] [--stark-src DIR]`
and `exps-codegen gen-exps -p PK [--exps-arch A] [--exps-cap N] [--exps-chunk N]
[--exps-stark-src DIR]` (`--stark-src` is ignored: nothing outside this package is needed;
`--keep-dir D` also keeps the original's flat gen_*.cu / gen_common.cuh / gen.log).
`exps-codegen COMMAND --help` lists the flags of a command. The build runs on the same doit task
graph as `doit -f <checkout>/dodo.py`.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from pathlib import Path

from codegen import EMITTER_VERSION, __version__
from codegen.build import knobs as _knobs
from codegen.build.preflight import UserError

log = logging.getLogger("exps_codegen")


def setup_logging(verbose: bool = False) -> None:
    """The same log lines as `doit` with our dodo.py (front.setup_logging)."""
    from codegen.build.front import setup_logging as setup
    setup(verbose)

#: the flags of each command (a flag no command of it reads is not offered: `--help` tells the truth)
BUILD = ("arch", "cap", "chunk", "chunk_bounds", "launcher", "build_dir", "compile_timeout", "jobs",
         "allow_bad_input", "verbose")
FLAGS = {
    "build": BUILD,
    "emit": ("arch", "cap", "chunk", "chunk_bounds", "launcher", "build_dir", "jobs", "allow_bad_input",
             "verbose"),
    "status": ("build_dir",),
    "verify": ("arch", "cap", "chunk", "build_dir", "compile_timeout", "jobs", "verbose"),
    "report": ("build_dir",),
    "clean": ("build_dir",),
    "gpucheck": ("cap", "chunk", "build_dir"),
}
#: what a command reads when it does not offer the flag
DEFAULTS = {"arch": "auto", "cap": None, "chunk": None, "chunk_bounds": True, "launcher": None,
            "build_dir": None, "compile_timeout": None, "jobs": 1, "allow_bad_input": False, "verbose": False}


def _flags(p: argparse.ArgumentParser, which: tuple[str, ...], pipeline: bool = False) -> None:
    """The flags `which`; with `pipeline`, also proofman-setup's `--exps-*` spellings."""
    def names(flag: str) -> list[str]:
        return [flag, "--exps-" + flag[2:]] if pipeline else [flag]
    if "arch" in which:
        p.add_argument(*names("--arch"), dest="arch", default="auto",
                       help="GPU archs: auto (this machine's GPU; with none, sm_90), major, or a list like "
                            "89,120 / sm_90")
    if "cap" in which:
        p.add_argument(*names("--cap"), dest="cap", type=int, default=None,
                       help="skip AIRs whose Q has more ops (as the JSON gives them; default: no limit: "
                            "chunking builds any Q)")
    if "chunk" in which:
        p.add_argument(*names("--chunk"), dest="chunk", type=int, default=None,
                       help="fixed ops per Q chunk (0 = one kernel); turns autotune off")
    if "chunk_bounds" in which:
        p.add_argument("--no-chunk-bounds", dest="chunk_bounds", action="store_false",
                       help="no second compile of a chunked Q's kernels with launch bounds (a faster build "
                            "of the large AIRs, their Q 3-5%% slower)")
    if "launcher" in which:
        p.add_argument("--launcher", default=_knobs.read().launcher_text,
                       help="compiler launcher in front of nvcc, e.g. ccache (env EXPS_LAUNCHER)")
    if "build_dir" in which:
        p.add_argument("--build-dir", default=None,
                       help="build dir (default: $EXPS_BUILD_ROOT or ${XDG_CACHE_HOME:-~/.cache}/exps-codegen/builds, then "
                            "<key name>-<digest of its path>: the one `doit pk=PK` uses too)")
    if "compile_timeout" in which:
        p.add_argument("--compile-timeout", type=float, default=None, metavar="S",
                       help="kill an nvcc compile or link after S seconds (that AIR fails; default: none)")
    if "jobs" in which:
        p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel tasks")
    if "allow_bad_input" in which:
        p.add_argument("--allow-bad-input", action="store_true",
                       help="an AIR whose JSON cannot be used gets no .so either way; by default the build "
                            "then exits 1 (after building the others), with this flag 0")
    if "verbose" in which:
        p.add_argument("-v", "--verbose", action="store_true", help="debug logging (the autotune's probes too)")


STATUS_EPILOG = """exit status: 0 when every AIR is current or skipped by design (its Q needs what the
GPU prover does not compute, or it is above --cap); 1 when any is stale, missing, bad input or
refused (a build makes or removes what is needed); 2 on a mistake (no such key)."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="exps-codegen", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--version", action="version", version=f"exps-codegen {__version__} (emitter {EMITTER_VERSION})")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    for name, help_ in (("build", "build and place every <base>.exps.so"),
                        ("emit", "write the CUDA sources only (the provingKey untouched; --keep-dir D: a copy in D)"),
                        ("status", "per AIR: current / stale / missing / skipped / bad input / refused"),
                        ("verify", "host check of every covered expression against the oracle"),
                        ("clean", "remove what the build made"),
                        ("report", "write <build>/report.json and report.html from the build dir"),
                        ("gpucheck", "check the placed .so files on this machine's GPU (needs CuPy)")):
        sp = sub.add_parser(name, help=help_, description=help_, epilog=STATUS_EPILOG if name == "status" else None)
        sp.add_argument("pk", help="provingKey directory")
        _flags(sp, FLAGS[name])
        if name == "emit":
            sp.add_argument("--keep-dir", default=None,
                            help="also copy the sources into D (D/<kernel>/src/); the build dir stays the default")
        if name == "verify":
            sp.add_argument("--seed", type=int, default=1, help="random input seed")
            sp.add_argument("--rows", type=int, default=1 << 13, help="max rows per check")
            sp.add_argument("--rebuild", action="store_true",
                            help="instead: compile every AIR afresh from its JSON (a private build dir and "
                                 "object cache, no launcher) and check that each placed .so is byte-identical "
                                 "(a .so from a shared cache or another machine is what this machine makes)")
    sp = sub.add_parser("sample", help="write the embedded sample provingKey into DIR (new or empty)",
                        description="write the embedded sample provingKey (its JSON inputs: 6 AIRs) into DIR, "
                                    "a new or empty folder; then `exps-codegen build DIR`")
    sp.add_argument("dir", metavar="DIR", help="where the sample key goes (created if missing)")
    sub.add_parser("gen-exps", help="the original tool's flags, pil2-proofman's spellings "
                                    "(exps-codegen gen-exps --help)", add_help=False)
    return ap


def legacy_parser() -> argparse.ArgumentParser:
    """The original tool's flags, as pil2-proofman spells them: `proofman-cli gen-exps
    --proving-key PK [--arch] [--cap] [--chunk] [--keep-dir] [--stark-src] [--emit-only]` and
    `proofman-setup gen-exps -p PK [--exps-arch] [--exps-cap] [--exps-chunk] [--exps-stark-src]`."""
    ap = argparse.ArgumentParser(prog="exps-codegen gen-exps", description="the original tool's flags "
                                 "(pil2-proofman's `gen-exps` spellings)")
    ap.add_argument("--proving-key", "-p", dest="proving_key", required=True, help="provingKey directory")
    ap.add_argument("--keep-dir", default=None,
                    help="after the build, copy the sources into D: D/<kernel>/src/ and the original's flat "
                         "copies (gen_<kernel>_*.cu, gen_common.cuh, gen.log); the build dir stays the default")
    ap.add_argument("--emit-only", action="store_true", help="sources only")
    ap.add_argument("--stark-src", "--exps-stark-src", dest="stark_src", default=None,
                    help="ignored: nothing outside this package is needed")
    _flags(ap, BUILD, pipeline=True)
    return ap


def write_flat_keep(s, keep: Path) -> int:
    """The original tool's flat keep-dir next to ours: `gen_<kernel>_<tu>.cu` for every TU (the
    generic inverse kernel's, the same file in every kernel that has one: `gen_exps_xinv.cu`),
    `gen_common.cuh`, and `gen.log` with one line `name, base, sym, slots` per AIR that has a
    kernel (name: the AIR's file base; base: its path in the key; sym: its kernel; slots:
    scratch slots of its Q). Returns the number of AIRs listed."""

    from codegen.build.actions import read_json
    from codegen.discover import discover
    from codegen.emit import COMMON_FILES
    keep.mkdir(parents=True, exist_ok=True)
    lines = []
    for p in discover(s.pk):
        man = read_json(Path(s.build) / p.key / "manifest.json")
        if not man or man.get("skip") or not man.get("files"):
            continue
        src = Path(s.build) / p.key / "src"
        for name in sorted(man["files"]):
            shutil.copyfile(src / name, keep / f"gen_{name}")
        for name in COMMON_FILES:
            shutil.copyfile(src / name, keep / name)
        lines.append(f"{p.base}, {p.rel}, {p.key}, {man['plan']['slots']}")
    (keep / "gen.log").write_text("".join(x + "\n" for x in lines))
    return len(lines)


def _settings(a):
    from codegen.tasks import Settings
    v = {k: getattr(a, k, d) for k, d in DEFAULTS.items()}
    try:
        return Settings(pk=a.pk, build=v["build_dir"], arch=v["arch"], cap=v["cap"], chunk=v["chunk"],
                        chunk_bounds=v["chunk_bounds"], launcher=v["launcher"],
                        compile_timeout=v["compile_timeout"], allow_bad_input=v["allow_bad_input"],
                        namespace="")
    except ValueError as e:
        raise UserError(str(e)) from None


def keep_sources(s, keep: Path) -> int:
    """Our layout of the sources, copied from the build dir into `keep`: `keep/<kernel>/src/`
    for every kernel that has sources. Returns the number of kernels copied."""
    from codegen.build.actions import read_json
    from codegen.discover import discover, kernels
    n = 0
    for key in sorted(kernels(discover(s.pk))):
        src = Path(s.build) / key / "src"
        man = read_json(Path(s.build) / key / "manifest.json")
        if not man or man.get("skip") or not man.get("files") or not src.is_dir():
            continue
        dst = Path(keep) / key / "src"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        n += 1
    return n


def run_doit(s, targets: list[str], jobs: int = 1, emit_only: bool = False, extra: list[str] | None = None) -> int:
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from codegen.build.front import check_state, doit_config
    from codegen.build.reporter import ProgressReporter, reported
    from codegen.tasks import exps_tasks, lock_build, unlock_build

    if s.namespace:   # the CLI owns its graph: plain stage names (ir ... link), as our dodo.py
        import dataclasses
        s = dataclasses.replace(s, namespace="")

    def task_exps():
        yield from reported(exps_tasks(s, emit_only=emit_only))

    cfg = doit_config(s)
    cfg["outfile"] = sys.stdout        # doit's default is sys.stdout as of its import
    mod = {"task_exps": task_exps, "DOIT_CONFIG": cfg}
    argv = list(extra or ["run"])
    if jobs > 1 and argv[0] == "run":
        argv += ["-n", str(jobs), "-P", "thread"]
    lock_build(s)
    check_state(s)
    ProgressReporter.settings = s
    ProgressReporter.emit_only = emit_only
    streams = sys.stdout, sys.stderr
    try:
        return DoitMain(ModuleTaskLoader(mod)).run(argv + targets)
    except SystemExit as e:   # the reporter's exit 1 when the build state could not be saved
        return e.code if isinstance(e.code, int) else 1
    finally:
        # doit's parallel run leaves its own writer in sys.stdout / sys.stderr: what we print after
        # the run (the verify table, "sources in", "kept:") must reach the real ones
        sys.stdout, sys.stderr = streams
        unlock_build(s)   # a process that embeds us may build again, or let another build run


def _preflight(s, need_nvcc: bool, places: bool = False) -> None:
    from codegen.build.preflight import check
    for note in check(s, need_nvcc=need_nvcc, places=places):
        print(note, file=sys.stderr)


def _check_keep_dir(s, keep) -> None:
    """`--keep-dir D` receives copies of the sources: never the provingKey or a folder in it."""
    from codegen.discover import shown
    if keep:
        d, k = Path(os.path.realpath(keep)), Path(os.path.realpath(s.pk))
        if d == k or d.is_relative_to(k) or k.is_relative_to(d):
            raise UserError(f"--keep-dir {shown(keep)} is, holds or is inside the provingKey: choose another folder")


def cmd_build(a) -> int:
    s = _settings(a)
    _check_keep_dir(s, getattr(a, "keep_dir", None))
    _preflight(s, need_nvcc=True, places=True)
    return run_doit(s, ["link", "gone"], a.jobs)


def cmd_emit(a) -> int:
    from codegen.discover import shown
    s = _settings(a)
    _check_keep_dir(s, getattr(a, "keep_dir", None))
    _preflight(s, need_nvcc=False)
    rc = run_doit(s, ["emit"], a.jobs, emit_only=True)
    if rc in (0, 1):      # (1: an AIR failed or had bad input; the others' sources are there)
        keep = getattr(a, "keep_dir", None)
        if keep and getattr(a, "cmd", None) == "emit":
            keep_sources(s, Path(keep))
        print(f"sources in {shown(keep or s.build)}/<kernel>/src/")
    return rc


def cmd_report(a) -> int:
    from codegen.build import report
    from codegen.discover import shown
    from codegen.build.preflight import check_key
    s = _settings(a)
    check_key(s.pk)
    if not Path(s.build).is_dir():
        raise UserError(f"no build dir {shown(s.build)}: build first (exps-codegen build PK / doit pk=PK)")
    j, h = report.write(s, report.rebuild(s))
    print(f"{shown(j)}\n{shown(h)}")
    return 0


def cmd_clean(a) -> int:
    from codegen.build.front import clean_build
    s = _settings(a)
    clean_build(s)
    return 0


def status_rows(s) -> list[dict]:
    """Per AIR: current / stale / missing / skipped / bad input / refused (and stale for a `.so`
    whose AIR became unreadable or vanished: the next build removes it). Current and stale compare
    the identity the placed `.so` embeds with the AIR's files on disk now (settle.so_state);
    skipped and bad input need the skip to have been recorded for those very files."""
    from codegen.build.actions import read_json
    from codegen.discover import scan, shown
    from codegen.build.settle import so_state
    from codegen.tasks import BAD_INPUT, shown_reason
    rows = []
    sc = scan(s.pk)
    for p in sc.placements:
        ir = read_json(Path(s.build) / p.key / "ir.json") or {}
        man = read_json(Path(s.build) / p.key / "manifest.json") or {}
        of_now = ir.get("content") == p.content
        skip = (p.error and f"{BAD_INPUT}: {p.error}") or (of_now and (ir.get("air_skip") or man.get("skip"))) or ""
        state, why = so_state(s, p)
        if state == "missing" and skip:
            state = BAD_INPUT if skip.startswith(BAD_INPUT) else "skipped"
        rows.append({"air": shown(p.rel), "kernel": p.key, "state": state,
                     "reason": shown_reason(s, why or skip)})
    for r in sc.refused:
        rows.append({"air": r.rel, "kernel": "", "state": "refused", "reason": r.reason})
    for b in sc.broken:
        rows.append({"air": b.rel, "kernel": "", "state": "stale", "reason": b.reason})
    return rows


#: the states of `status`, in the order its count line names them
STATES = ("current", "stale", "missing", "skipped", "bad input", "refused")


def cmd_status(a) -> int:
    """Exit 0 when every AIR is current or skipped by design, 1 otherwise (STATUS_EPILOG)."""
    from codegen.discover import shown
    s = _settings(a)
    from codegen.build.preflight import check_key
    check_key(s.pk)
    rows = status_rows(s)
    w = max([len(r["air"]) for r in rows] + [3])
    for r in rows:
        print(f"{r['air'].ljust(w)}  {r['state']:<9} {r['reason']}".rstrip())
    counts = {k: sum(r["state"] == k for r in rows) for k in STATES}
    print(", ".join(f"{v} {k}" for k, v in counts.items() if v or k in STATES[:4])
          + f"  (build dir {shown(s.build)})")
    return 0 if all(r["state"] in ("current", "skipped") for r in rows) else 1


def _so_digest(so: Path) -> str | None:
    """sha256 hex of a placed `.so`; None when there is none; "!<why>" when it is not a regular
    file one can read (a FIFO, a device: never read)."""
    import hashlib

    from codegen.emit import open_so
    if not os.path.lexists(so):
        return None
    h = hashlib.sha256()
    try:
        with open_so(so) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError as e:
        return f"!{e.strerror or e}"
    return h.hexdigest()


def cmd_verify_rebuild(a) -> int:
    """`verify --rebuild`: a fresh local build of a copy of the key's JSON, compared byte for
    byte with the `.so` files placed in the key. Exit 1 if any differs."""
    import tempfile

    from codegen.discover import scan, shown
    from codegen.build.preflight import check
    from codegen.tasks import Settings
    s = _settings(a)
    check(s, need_nvcc=True, creates_build_dir=False)
    sc = scan(s.pk)
    with tempfile.TemporaryDirectory(prefix="exps-rebuild-") as tmp:
        copy = Path(tmp) / "pk"
        for p in sc.placements:
            d = copy / Path(p.rel).parent
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p.starkinfo, copy / (p.rel + ".starkinfo.json"))
            shutil.copyfile(p.expressions, copy / (p.rel + ".expressionsinfo.json"))
        with _knobs.overridden(EXPS_CACHE_DIR=str(Path(tmp) / "cache"), EXPS_LINK_CACHE="0",
                               EXPS_LAUNCHER=None):
            s2 = Settings(pk=copy, build=Path(tmp) / "build", arch=a.arch, cap=a.cap, chunk=a.chunk,
                          launcher=None, compile_timeout=a.compile_timeout, namespace="")
            from codegen.build.reporter import ProgressReporter
            ProgressReporter.show_summary = False
            try:
                rc = run_doit(s2, ["link", "gone"], a.jobs)
            finally:
                ProgressReporter.show_summary = True
        bad = 0
        w = max([len(shown(p.rel)) for p in sc.placements] + [3])
        for p in sc.placements:
            mine, fresh = p.so_path, copy / (p.rel + ".exps.so")
            placed = _so_digest(mine)
            if placed is None and not fresh.exists():
                res = "no .so (skipped both times)"
            elif placed is None:
                res = "no .so placed (a fresh build makes one: run the build)"
            elif placed.startswith("!"):
                res, bad = f"DIFFERS: the placed .so {placed[1:]}", bad + 1
            elif not fresh.exists():
                res, bad = "DIFFERS: placed, but a fresh build makes none", bad + 1
            elif placed == _so_digest(fresh):
                res = f"identical (sha256 {placed[:16]})"
            else:
                bad += 1
                res = f"DIFFERS: sha256 {placed[:16]} placed vs {_so_digest(fresh)[:16]} rebuilt"
            print(f"{shown(p.rel).ljust(w)}  {res}")
    print(f"{len(sc.placements)} AIRs, {bad} differ" + ("" if rc == 0 else f" (the fresh build exited {rc})"))
    return 1 if bad or rc else 0


def cmd_verify(a) -> int:
    if getattr(a, "rebuild", False):
        return cmd_verify_rebuild(a)
    from codegen.build.actions import read_json
    from codegen.discover import discover, kernels, shown
    from codegen.check.hostcheck import check_air
    from codegen.coverage import cover
    from codegen.build.heartbeat import Heartbeat
    from codegen.model import ModelError, load_air, load_json
    from codegen.build.summary import clip
    from codegen.tasks import shown_reason
    s = _settings(a)
    bad_input = 0
    from codegen.build.preflight import check_key
    check_key(s.pk)
    bad = 0
    tot_words = tot_exprs = 0
    print(f"{'AIR':<60} {'kernel':<28} {'Q ops':>6} {'chunks':>6} {'exprs':>5} {'checks':>6} {'words':>10}  result")
    for key, ps in sorted(kernels(discover(s.pk)).items()):
        p = ps[0]
        t0 = time.monotonic()
        blank = f"{'':>6} {'':>6} {'':>5} {'':>6} {'':>10} "
        try:
            si, ei = load_air(p.starkinfo, p.expressions)
        except ModelError as e:
            bad_input += 1
            print(f"{shown(p.rel)[-60:]:<60} {key[:28]:<28} {blank} bad input: {clip(shown_reason(s, str(e)), 100)}")
            continue
        cov = cover(si, ei, cap=s.cap)
        if cov.air_skip:
            print(f"{shown(p.rel)[-60:]:<60} {key[:28]:<28} {blank} skipped: {clip(shown_reason(s, cov.air_skip), 100)}")
            continue
        tune = read_json(Path(s.build) / key / "tune.json") or {}
        opc = s.chunk if s.chunk is not None else tune.get("ops_per_chunk")
        with Heartbeat(f"verify {key} ({cov.q_ops} Q ops, {len(cov.exprs)} expressions)") as hb:
            hb.status("compiling its kernels with g++ and comparing them with the oracle")
            r = check_air(key, si, load_json(p.starkinfo), load_json(p.expressions), cov, ops_per_chunk=opc,
                          seed=a.seed)
        from codegen.check.hostcheck import default_ops_per_chunk
        from codegen.plan import plan
        chunks = plan(cov.q, opc if opc is not None else default_ops_per_chunk(cov.q_ops)).n_chunks
        words = r.q_words + r.expr_words
        tot_words += words
        tot_exprs += len(cov.exprs)
        res = "bit-identical" if r.ok else "MISMATCH: " + "; ".join(r.mismatches[:3])
        bad += not r.ok
        for q in ps:
            print(f"{shown(q.rel)[-60:]:<60} {key[:28]:<28} {cov.q_ops:>6} {chunks:>6} {len(cov.exprs):>5} "
                  f"{r.expr_checks:>6} {words:>10}  {res} ({time.monotonic() - t0:.1f}s)")
    print(f"{tot_exprs} covered expressions (+ Q per kernel), {tot_words} words compared, "
          f"{bad} kernel(s) with mismatches" + (f", {bad_input} with bad input" if bad_input else ""))
    return 1 if bad or bad_input else 0


def cmd_sample(a) -> int:
    """The embedded sample key's JSON copied into DIR, a new or empty folder (a non-empty one is
    refused: one line, exit 2)."""
    from codegen.discover import shown
    from codegen.resources import SAMPLE, sample_files
    dst = Path(a.dir)
    try:
        if dst.exists() and not dst.is_dir():
            raise UserError(f"{shown(dst)} is not a directory: give a new or empty folder for the sample key")
        if dst.is_dir() and any(dst.iterdir()):
            raise UserError(f"{shown(dst)} is not empty: give a new or empty folder for the sample key")
        files = sample_files()
        for rel in files:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SAMPLE / rel, dst / rel)
    except OSError as e:
        raise UserError(f"cannot write the sample key to {shown(dst)}: {e.strerror or e}") from None
    airs = sum(str(r).endswith(".starkinfo.json") for r in files)
    print(f"sample provingKey ({airs} AIRs, {len(files)} JSON files) in {shown(dst)}; "
          f"build it with: exps-codegen build {shown(dst)}")
    return 0


def cmd_gpucheck(a) -> int:
    from codegen.build.preflight import UserError
    from codegen.check.gpucheck import main as gmain
    try:
        import cupy  # noqa: F401  (the check's device memory)
    except ImportError as e:
        raise UserError(f"gpucheck needs CuPy and a CUDA GPU ({e}): pip install -e '.[gpu]', "
                        "or run `exps-codegen verify` (the host check, no GPU)") from None
    return gmain(_settings(a))


COMMANDS = {"build": cmd_build, "emit": cmd_emit, "status": cmd_status, "verify": cmd_verify,
            "clean": cmd_clean, "report": cmd_report, "gpucheck": cmd_gpucheck, "sample": cmd_sample}


def _dispatch(argv: list[str]) -> int:
    gen = bool(argv) and argv[0] == "gen-exps"
    if gen or any(x.startswith("--proving-key") or x == "-p" for x in argv):
        a = legacy_parser().parse_args(argv[1:] if gen else argv)
        a.pk = a.proving_key
        if a.stark_src:
            print("note: --stark-src is ignored: exps-codegen needs no pil2-stark checkout", file=sys.stderr)
        setup_logging(a.verbose)
        rc = cmd_emit(a) if a.emit_only else cmd_build(a)
        if rc in (0, 1) and a.keep_dir:      # (1: the AIRs that built are kept)
            from codegen.discover import shown
            s = _settings(a)
            try:
                keep_sources(s, Path(a.keep_dir))
                n = write_flat_keep(s, Path(a.keep_dir))
            except OSError as e:
                raise UserError(f"cannot keep the sources in {shown(a.keep_dir)}: {e.strerror or e}") from None
            print(f"kept: {shown(a.keep_dir)}/<kernel>/src/ and {shown(a.keep_dir)}/gen_<kernel>_*.cu, "
                  f"gen_common.cuh, gen.log ({n} AIRs)")
        return rc
    a = parser().parse_args(argv)
    if not a.cmd:
        parser().print_help()
        return 2
    setup_logging(getattr(a, "verbose", False))
    return COMMANDS[a.cmd](a)


def main(argv: list[str] | None = None) -> int:
    """Every user mistake is one line and exit code 2; an interrupt is one line and 130."""
    from codegen.build import procs
    from codegen.build.preflight import UserError, fail
    from codegen.build.toolchain import ToolchainError
    argv = sys.argv[1:] if argv is None else argv
    setup_logging()
    procs.install()
    try:
        return _dispatch(argv)
    except (UserError, ToolchainError, _knobs.KnobError, FileNotFoundError, NotADirectoryError) as e:
        return fail(e)
    except KeyboardInterrupt:       # before the handlers were installed / in a thread
        print(procs.INTERRUPT_LINE, file=sys.stderr)
        return 130
    except BrokenPipeError:         # `exps-codegen status PK | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
