"""The actions of the build stages (ir, tune, emit, cc, link): plain module-level functions with
plain arguments, run by doit tasks (tasks.py) or directly. Each reads and writes files only in the
kernel's build dir, except `ir` and `cc`, which first remove the kernel's (now stale) `.so` files,
and `link`, which places (or removes) the AIR's `.so`. For `doit emit`, `ir` runs with
`remove_stale=False`: `ir`, `tune` and `emit` then never touch the provingKey.

Build dir layout, per kernel key:
    <build>/<key>/ir.json        coverage: Q IR, covered expressions, skips (or the AIR's skip)
    <build>/<key>/tune.json      chosen chunking and the probes that chose it
    <build>/<key>/src/           device TUs (*.cu), the launch table (<key>_abi.cpp), and the common
                                 files (gen_common.cuh, exps_abi.h, exps_runtime.cpp); manifest.json last
    <build>/<key>/obj/           a fatbin per device TU, the table's and the launcher's objects;
                                 objs.json written last (the objects to link, the ptxas reports)
    <build>/link/<digest>.json   link stamp of each placement (its AIR, placed / skipped + reason)
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
from pathlib import Path

from codegen.build import toolchain
from codegen.build.autotune import MAX_MIN_BLOCKS, TuneResult, estimated_choice
from codegen.build.cache import atomic_write
from codegen.build.fsutil import remove_stale_temps
from codegen.build.heartbeat import Heartbeat
from codegen.build.cache import ObjectCache
from codegen.build.kernelcc import KernelNameError, compile_kernel, host_options, link_cached, stage_sources
from codegen.build.probes import Prober
from codegen.emit import COMMON_FILES, KernelSource, device_tus, render, source_hash, tu_kernels, tu_twins
from codegen.coverage import CAP, EXPR_CAP, SLOTS_CAP, Coverage, cover, coverage_from_json, coverage_to_json
from codegen.discover import content_digest, shown
from codegen.model import ModelError, parse_expressionsinfo, parse_json, parse_starkinfo, read_input
from codegen.plan import max_live, plan

log = logging.getLogger("exps_codegen")
FORMAT = 1


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n").encode())


def read_json(path: Path):
    """A stage file, or None when it is missing, corrupt or of another format (-> stale)."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("format") == FORMAT else None


def remove_so(so_paths: list[str]) -> None:
    """Remove the `.so` files (absent is fine; a failure to remove raises OSError: the caller must
    not go on as if the stale library were gone)."""
    for s in so_paths:
        Path(s).unlink(missing_ok=True)


def act_remove_orphan(so_path: str, reason: str) -> bool:
    """Remove a `<base>.exps.so` that no valid AIR owns any more (discover.Broken: its starkinfo
    became a FIFO / directory / symlink loop, its expressionsinfo vanished, its AIR is gone or
    refused). Logs one line `removed <so>: <reason>` (or the error) and returns True (False when
    it cannot be removed). A symlink is removed, never followed; a directory is left alone."""
    name = shown(so_path)
    try:
        if os.path.isdir(so_path) and not os.path.islink(so_path):
            log.error("cannot remove %s (%s): it is a directory", name, reason)
            return False
        os.unlink(so_path)
    except FileNotFoundError:
        return True
    except OSError as e:
        log.error("cannot remove stale %s (%s): %s", name, reason, e.strerror or e)
        return False
    log.warning("removed %s: %s", name, reason)
    return True


# ----------------------------------------------------------------------------------------- ir
def act_ir(key: str, starkinfo: str, expressions: str, out: str, so_paths: list[str],
           cap: int = CAP, expr_cap: int = EXPR_CAP, remove_stale: bool = True) -> bool:
    """Parse and lower one kernel. `ir` runs only when the kernel's inputs changed, so the
    placements' old `.so` files (`so_paths`) are stale from now on: removed first, before any work
    (tune compiles probes for minutes; a kill then must not leave the old kernel loadable).
    `doit emit` passes `remove_stale=False`: it leaves the provingKey alone (then `act_cc`, the
    first build-only stage, removes them). Otherwise writes only into the build dir. An OSError
    (disk full, no permission) fails this kernel with one line.

    Each JSON file is read once: what is parsed and what ir.json records as the kernel's `content`
    (discover.content_digest: the identity its `.so` embeds and that the task's up-to-date check
    compares with the files on disk) are the same bytes, whatever happens to the files meanwhile."""
    doc = {"format": FORMAT, "key": key, "starkinfo": starkinfo, "expressions": expressions}
    try:
        if remove_stale:
            remove_so(so_paths)
        Path(out).unlink(missing_ok=True)
        try:
            si_bytes, ex_bytes = read_input(starkinfo), read_input(expressions)
            doc["inputs"] = {"starkinfo": hashlib.sha256(si_bytes).hexdigest(),
                             "expressions": hashlib.sha256(ex_bytes).hexdigest()}
            si = parse_starkinfo(parse_json(si_bytes, starkinfo), starkinfo)
            doc["content"] = content_digest(si, doc["inputs"]["expressions"])   # (bad expressions too)
            ei = parse_expressionsinfo(parse_json(ex_bytes, expressions), expressions, si)
            cov = cover(si, ei, cap=cap, expr_cap=expr_cap)
            doc.update(coverage_to_json(cov))
            doc["q_ops"] = cov.q_ops
        except ModelError as e:
            doc.update({"air_skip": f"bad input: {e}", "q": None, "exprs": [], "skipped_exprs": [],
                        "q_ops": 0})
        _write_json(Path(out), doc)
    except OSError as e:
        log.error("ir of kernel %s (%s) failed: %s", key, shown(starkinfo), _oserr(e))
        return False
    return True


def ir_current(ir_json: str, content: str) -> bool:
    """The `ir` task's up-to-date check: ir.json was made from files whose content is `content`
    (discovery's digest of the files on disk now). Not doit's file_dep: doit would checksum the
    files when the task ends, and record an edit made while the task ran as done."""
    d = read_json(Path(ir_json))
    return d is not None and bool(content) and d.get("content") == content


def _oserr(e: OSError) -> str:
    """`[Errno 28] No space left on device: <file>` on one printable line."""
    where = f": {shown(e.filename)}" if e.filename else ""
    return f"[Errno {e.errno}] {e.strerror or e}{where}" if e.errno else f"{e}"


def load_coverage(ir_json: str) -> tuple[dict, Coverage]:
    d = read_json(Path(ir_json))
    if d is None:
        raise RuntimeError(f"{ir_json} is missing or unreadable: rerun the build")
    return d, coverage_from_json(None, d)


# --------------------------------------------------------------------------------------- tune


def act_tune(key: str, ir_json: str, out: str, work_dir: str, archs: list[int], chunk: int | None,
             slots_cap: int = SLOTS_CAP, launcher: list[str] | None = None,
             settings: dict | None = None, chunk_bounds: bool = True, so_paths: list[str] | None = None) -> bool:
    """Choose the chunking of Q. Tune runs only when its inputs changed, so the kernel's `.so`
    files (`so_paths`; None for `doit emit`, which leaves the provingKey alone) are stale from now
    on: removed first, as `ir` and `cc` do (a tune that fails leaves no `.so` behind). With `chunk`
    fixed nothing is compiled; with no toolchain (`archs == []`, `doit emit` without nvcc) the cost
    model's estimate picks the chunking, and tune.json says so; else probes compile candidate plans
    on ONE arch (`probes.Prober`: the first probe of a small kernel is cc's own compile when
    `settings`, what emit hashes, are given). The choice is compiled once, for every target arch,
    by `cc` (a spill on another arch costs speed there, never the AIR's kernel)."""
    try:
        if so_paths:
            remove_so(so_paths)
        d, cov = load_coverage(ir_json)
        doc: dict = {"format": FORMAT, "key": key}
        if cov.air_skip:
            doc.update({"skip": cov.air_skip, "ops_per_chunk": 0, "probes": []})
            _write_json(Path(out), doc)
            return True
        q = cov.q
        assert q is not None
        if chunk is not None:
            pl = plan(q, chunk)
            res = TuneResult(pl.ops_per_chunk, how="fixed")
            if pl.total_slots > slots_cap:
                res.skip = f"chunk {chunk}: {pl.total_slots} scratch slots > SLOTS_CAP {slots_cap}"
        elif not archs:
            res = estimated_choice(q, slots_cap=slots_cap)
            how = f"{res.ops_per_chunk} ops per chunk" if res.ops_per_chunk else "one kernel"
            print(f"{key}: no nvcc to probe with: chunking estimated by the cost model ({how})", file=sys.stderr)
        else:
            sh = None if settings is None else source_hash(d.get("content", ""), settings)
            prober = Prober(key, q, cov.exprs, archs, launcher, work_dir, slots_cap, chunk_bounds, sh)
            res = prober.run()
            doc["sampled"] = {str(k): v for k, v in sorted(prober.sampled.items())}
            shutil.rmtree(work_dir, ignore_errors=True)
        doc.update(res.to_json())
        _write_json(Path(out), doc)
    except toolchain.CompileError as e:
        log.error("autotune of kernel %s failed: %s", key, _why(e))
        return False
    except OSError as e:   # disk full, no permission: this kernel fails, the others go on
        log.error("autotune of kernel %s failed: %s", key, _oserr(e))
        return False
    return True


# --------------------------------------------------------------------------------------- emit
def _bad_tune(tune_json: str, so_paths: list[str] | None, why: str) -> RuntimeError:
    """A tune.json emit cannot take (not what act_tune writes): it is removed, so that the next
    build tunes again (doit reruns a task whose target is gone), and so are the kernel's `.so`
    files (`so_paths`; None for `doit emit`, which never touches the provingKey): a failed AIR
    leaves no `.so` behind. Returns the error to raise."""
    Path(tune_json).unlink(missing_ok=True)
    if so_paths:
        remove_so(so_paths)
    gone = " and this kernel's .so files" if so_paths else ""
    return RuntimeError(f"{tune_json}: {why}: removed it{gone}; the next build tunes again")


def act_emit(key: str, ir_json: str, tune_json: str, src_dir: str, manifest: str, settings: dict,
             so_paths: list[str] | None = None, chunk_bounds: bool = True) -> bool:
    """Render the kernel's sources into `src_dir` and its manifest (files, kernels, plan; `twins`:
    the TUs cc compiles again with launch bounds; without `chunk_bounds` only a bounded single
    kernel's, its tune's decision). The identity the `.so` embeds is `source_hash` of the content
    ir.json records (the bytes its IR was made from) and `settings`. The kernel's `.so` files
    (`so_paths`; None for `doit emit`) are stale from now on: removed first."""
    try:
        if so_paths:
            remove_so(so_paths)
    except OSError as e:
        log.error("emit of kernel %s failed: cannot remove the stale .so: %s", key, _oserr(e))
        return False
    d, cov = load_coverage(ir_json)
    t = read_json(Path(tune_json))
    if t is None:
        raise _bad_tune(tune_json, so_paths, "missing or unreadable")
    opc, mb = t.get("ops_per_chunk"), t.get("min_blocks", 0)
    if isinstance(opc, bool) or not isinstance(opc, int) or opc < 0:
        raise _bad_tune(tune_json, so_paths, f"'ops_per_chunk' is {opc!r}, not a whole number of ops")
    if isinstance(mb, bool) or not isinstance(mb, int) or not 0 <= mb <= MAX_MIN_BLOCKS:
        raise _bad_tune(tune_json, so_paths, f"'min_blocks' is {mb!r}, not a whole number from 0 to {MAX_MIN_BLOCKS}")
    skip = cov.air_skip or t.get("skip", "")
    src = Path(src_dir)
    doc: dict = {"format": FORMAT, "key": key, "skip": skip, "files": {}}
    try:
        Path(manifest).unlink(missing_ok=True)
        if not skip:
            assert cov.q is not None
            pl = plan(cov.q, opc)
            sh = source_hash(d["content"], settings)
            ks = KernelSource(key, cov.q, pl, cov.exprs, sh, min_blocks=mb)
            files = render(ks)
            pl = ks.plan          # after the IR passes: what the .so runs (chunks, slots, scratch)
            stage_sources(files, src)
            doc.update({"files": {n: hashlib.sha256(x.encode()).hexdigest() for n, x in sorted(files.items())},
                        "kernels": tu_kernels(ks), "twins": [w for w in tu_twins(ks) if chunk_bounds or "blocks" in w],
                        "source_hash": sh, "plan": pl.summary(), "q_ops": len(ks.q.ops),
                        "q_ops_in": len(cov.q.ops), "max_live": max_live(ks.q), "min_blocks": mb,
                        "exprs": len(cov.exprs), "min_scratch": pl.min_scratch})
            keep = set(files) | set(COMMON_FILES)
        else:
            keep = set()
        if src.is_dir():
            for p in src.iterdir():
                if p.is_file() and p.name not in keep:
                    p.unlink()
        _write_json(Path(manifest), doc)
    except OSError as e:      # disk full / no permission in the build dir: this kernel fails
        log.error("emit of kernel %s failed: %s", key, _oserr(e))
        return False
    return True


# ----------------------------------------------------------------------------------------- cc
def _why(e: Exception) -> str:
    """A tool failure for the log: what happened (failed / timed out / OSError), then the repro."""
    if isinstance(e, toolchain.CompileError):
        return f"{str(e).splitlines()[0]}\n{e.dump(False)}"
    if isinstance(e, OSError):
        return _oserr(e)
    return f"{type(e).__name__}: {e}"


def act_cc(key: str, manifest: str, obj_dir: str, out: str, archs: list[int], so_paths: list[str],
           airs: list[str], launcher: list[str] | None = None, timeout_s: float | None = None) -> bool:
    """Compile every TU of the kernel. The kernel's old `.so` files are stale from now on (cc runs
    only when its inputs changed): removed first, so a failed or interrupted build leaves the
    interpreter, never a stale kernel; `link` places the new ones. Errors name the AIRs."""
    try:
        remove_so(so_paths)
        Path(out).unlink(missing_ok=True)
    except OSError as e:      # a stale .so we cannot remove: say so, never report success
        log.error("compile of kernel %s (AIRs: %s) failed: cannot remove the stale .so: %s",
                  key, ", ".join(map(shown, airs)), _oserr(e))
        return False
    m = read_json(Path(manifest))
    if m is None:
        raise RuntimeError(f"{manifest} is missing or unreadable: rerun the build")
    doc: dict = {"format": FORMAT, "key": key, "skip": m["skip"], "objects": [], "reports": {}}
    try:
        if not m["skip"]:
            n_tus = len(device_tus(m["files"]))
            with Heartbeat(f"cc {key} ({n_tus} device TUs, {', '.join(f'sm_{a}' for a in archs)})") as hb:
                got = compile_kernel(Path(manifest).parent / "src", list(m["files"]), m.get("kernels", {}),
                                     Path(obj_dir), archs, ObjectCache(), launcher, timeout_s=timeout_s,
                                     twins=m.get("twins", []), hb=hb)
            doc["objects"] = got["objects"]
            doc["reports"] = got["reports"]
            doc["hits"] = got["hits"]
            doc["bounded"] = {str(c): b for c, b in sorted(got["bounded"].items())}
            doc["twin_reports"] = got["twin_reports"]
            doc["spill_bytes"] = sum(toolchain.spill_bytes(r) for r in doc["reports"].values())
        _write_json(Path(out), doc)
    except (toolchain.CompileError, KernelNameError, OSError) as e:   # nvcc failed/crashed/timed out; disk full
        log.error("compile of kernel %s (AIRs: %s) failed: %s", key, ", ".join(map(shown, airs)), _why(e))
        return False
    return True


# --------------------------------------------------------------------------------------- link
def act_link(rel: str, objs_json: str, so_path: str, stamp: str, archs: list[int],
             launcher: list[str] | None = None, timeout_s: float | None = None) -> bool:
    o = read_json(Path(objs_json))
    if o is None:
        raise RuntimeError(f"{objs_json} is missing or unreadable: rerun the build")
    so = Path(so_path)
    try:
        Path(stamp).unlink(missing_ok=True)
        for t in remove_stale_temps(so):    # a link killed while it wrote the .so (link reruns then)
            log.warning("removed %s: the temp file of a killed build", shown(t))
        if o["skip"]:
            so.unlink(missing_ok=True)
            _write_json(Path(stamp), {"format": FORMAT, "air": rel, "skip": o["skip"], "so": None})
            return True
        try:
            with Heartbeat(f"link {shown(rel)}") as hb:
                hb.status(f"linking {so.name} (nvcc)")
                link_cached([Path(x) for x in o["objects"]], so, host_options(archs), launcher, timeout_s)
        except BaseException:                 # no .so of a failed link (a partial one or the old)
            so.unlink(missing_ok=True)
            raise
        st = so.stat()
        _write_json(Path(stamp), {"format": FORMAT, "air": rel, "skip": "", "so": str(so),
                                  "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    except (toolchain.CompileError, OSError) as e:   # nvcc failed; disk full; no permission
        for p in (Path(stamp), so):           # reported failed: no .so (the summary = the disk)
            try:
                p.unlink(missing_ok=True)
            except OSError:
                pass
        log.error("link of %s failed: %s", shown(rel), _why(e))
        return False
    return True


def link_uptodate(stamp: str, so_path: str) -> bool:
    """The `.so` on disk is what the last link left (placed with that size/mtime, or absent)."""
    s = read_json(Path(stamp))
    if s is None:
        return False
    so = Path(so_path)
    if s["skip"]:
        return not so.exists()
    try:
        st = so.stat()
    except OSError:
        return False
    return st.st_size == s["size"] and st.st_mtime_ns == s["mtime_ns"]
