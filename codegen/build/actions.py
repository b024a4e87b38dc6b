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
    <build>/link/<rel>.json      link stamp of each placement (placed / skipped + reason)
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codegen.build import bounds, prelude, toolchain
from codegen.build.autotune import (MAX_MIN_BLOCKS, MAX_PROBES, SPILL_SLACK_BYTES, TuneResult,
                                     bound_single, candidate_plans, cost, estimated_choice, estimated_regs,
                                     first_probe, probe_literals, tune, tune_arch)
from codegen.build.cache import ObjectCache, atomic_write
from codegen.build.fsutil import remove_stale_temps
from codegen.build.heartbeat import Heartbeat
from codegen.emit import (COMMON_FILES, Q_KERNEL_RE, RUNTIME, TU_OPS, XINV_TU, KernelSource, device_tus,
                          q_symbols, render, render_probe, source_hash, tu_kernels, tu_twins)
from codegen.coverage import CAP, EXPR_CAP, SLOTS_CAP, Coverage, cover, coverage_from_json, coverage_to_json
from codegen.ir import KernelIR
from codegen.discover import content_digest
from codegen.model import ModelError, parse_expressionsinfo, parse_json, parse_starkinfo, read_input
from codegen.plan import Plan, max_live, plan
from codegen.resources import TEMPLATES

log = logging.getLogger("exps_codegen")
FORMAT = 1
HIDDEN = ("-Xcompiler", "-fvisibility=hidden")


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
    shown = os.fsencode(str(so_path)).decode("utf-8", "backslashreplace")
    shown = shown if shown.isprintable() else repr(shown)[1:-1]
    try:
        if os.path.isdir(so_path) and not os.path.islink(so_path):
            log.error("cannot remove %s (%s): it is a directory", shown, reason)
            return False
        os.unlink(so_path)
    except FileNotFoundError:
        return True
    except OSError as e:
        log.error("cannot remove stale %s (%s): %s", shown, reason, e.strerror or e)
        return False
    log.warning("removed %s: %s", shown, reason)
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
        log.error("ir of kernel %s (%s) failed: %s", key, _shown(starkinfo), _oserr(e))
        return False
    return True


def ir_current(ir_json: str, content: str) -> bool:
    """The `ir` task's up-to-date check: ir.json was made from files whose content is `content`
    (discovery's digest of the files on disk now). Not doit's file_dep: doit would checksum the
    files when the task ends, and record an edit made while the task ran as done."""
    d = read_json(Path(ir_json))
    return d is not None and bool(content) and d.get("content") == content


def _shown(path: str) -> str:
    t = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
    return t if t.isprintable() else repr(t)[1:-1]


def _oserr(e: OSError) -> str:
    """`[Errno 28] No space left on device: <file>` on one printable line."""
    where = f": {_shown(e.filename)}" if e.filename else ""
    return f"[Errno {e.errno}] {e.strerror or e}{where}" if e.errno else f"{e}"


def load_coverage(ir_json: str) -> tuple[dict, Coverage]:
    d = read_json(Path(ir_json))
    if d is None:
        raise RuntimeError(f"{ir_json} is missing or unreadable: rerun the build")
    return d, coverage_from_json(None, d)


# --------------------------------------------------------------------------------------- tune
def compile_options(archs: list[int], cache: ObjectCache | None = None) -> toolchain.CompileOptions:
    """A device TU's compile: device code only, every target arch (`nvcc -c -fatbin`), with the
    device prelude where it gives nvcc's bytes (build/prelude.py)."""
    return prelude.options(toolchain.CompileOptions(tuple(archs), extra_flags=HIDDEN, mode="fatbin"), cache)


def host_options(archs: list[int]) -> toolchain.CompileOptions:
    """The launch table's and the launcher's compile (host C++; no device code)."""
    return toolchain.CompileOptions(tuple(archs), extra_flags=HIDDEN, mode="host")


def stage_sources(files: dict[str, str], src_dir: Path) -> list[Path]:
    """Write TUs whose text changed (and the common files: header, table types, launcher);
    returns the TUs' paths."""
    src_dir.mkdir(parents=True, exist_ok=True)
    for name in COMMON_FILES:
        dst, common = src_dir / name, (TEMPLATES / name).read_bytes()
        if not dst.is_file() or dst.read_bytes() != common:
            atomic_write(dst, common)
    out = []
    for name, text in sorted(files.items()):
        p = src_dir / name
        data = text.encode()
        if not p.is_file() or p.read_bytes() != data:
            atomic_write(p, data)
        out.append(p)
    return out


def compile_tus(tus: list[Path], obj_dir: Path, opts: toolchain.CompileOptions, cache: ObjectCache,
                launcher: list[str] | None, jobs: int = 0, timeout_s: float | None = None,
                extra_flags: dict[str, tuple[str, ...]] | None = None, suffix: str = "",
                hb: Heartbeat | None = None, what: str = "device TUs") -> dict:
    """Compile TUs through the object cache in parallel; {tu name: (obj path, report, hit)}. A TU
    named in `extra_flags` gets those flags after `opts`' own; objects are `<stem><suffix>.o`.
    `hb`: the heartbeat whose status counts the TUs done."""
    obj_dir.mkdir(parents=True, exist_ok=True)
    jobs = jobs or max(1, min(len(tus), os.cpu_count() or 1))
    done = [0]
    if hb is not None:
        hb.status(f"0 of {len(tus)} {what} compiled")

    def one(tu: Path):
        more = (extra_flags or {}).get(tu.name, ())
        o = dataclasses.replace(opts, extra_flags=opts.extra_flags + more) if more else opts
        r = cache.compile_cached(tu, obj_dir / (tu.stem + suffix + ".o"), o, include_dirs=[tu.parent],
                                 launcher=launcher, timeout_s=timeout_s)
        if hb is not None:
            done[0] += 1
            hb.status(f"{done[0]} of {len(tus)} {what} compiled")
        return tu.name, (str(r.obj_path), r.report, r.hit)

    with ThreadPoolExecutor(jobs) as ex:
        return dict(ex.map(one, tus))


class KernelNameError(RuntimeError):
    """A launch table names a kernel its device TU's fatbin does not hold (an emitter bug)."""


def check_kernel_names(kernels: dict[str, list[str]], reports: dict[str, dict]) -> None:
    """Every kernel a launch table names (emit.tu_kernels, in the manifest) is an entry function
    ptxas compiled in its device TU, for every arch of the report; so a .so never fails to find a
    kernel at run time. A TU whose report is empty (a launcher that drops nvcc's stderr) is not
    checked."""
    for tu, names in kernels.items():
        rep = reports.get(tu) or {}
        if not rep:
            log.debug("no ptxas report for %s: its kernel names are not checked", tu)
            continue
        archs = {a for per_arch in rep.values() for a in per_arch}
        for n in names:
            got = set((rep.get(n) or {}).keys())
            if not rep.get(n) or got != archs or not all(st.get("entry") for st in rep[n].values()):
                raise KernelNameError(f"{tu}: the launch table names kernel {n}, which ptxas did not "
                                      f"compile as an entry for {sorted(archs - got) or sorted(archs)}")


def compile_twins(src: Path, twins: list[dict], reports: dict[str, dict], obj_dir: Path,
                  opts: toolchain.CompileOptions, cache: ObjectCache, launcher: list[str] | None,
                  jobs: int = 0, timeout_s: float | None = None, hb: Heartbeat | None = None) -> dict:
    """The bounded twins of a Q's device TUs (`bounds`; a single kernel's: its tune's bound): each
    TU whose chunk kernels could take a bound compiled again from source with `bounds.twin_flags`
    (through the object cache, in parallel). Always from source, never from the first compile's
    PTX: a twin's bytes are then those of its source and flags alone, whatever the object cache
    held and whether a launcher compiled it (a twin made from PTX carries other bytes), so every
    build of a key places the same `.so`. Returns {"fatbins": {f<slot>.fatbin: path} of the twins
    taken, "flags": the table's defines, "bounded": {chunk: min blocks} taken, "reports": {twin
    TU: ptxas report}}."""
    for w in twins:      # the manifest is ours, but what reaches a path or a flag is checked
        ok = (isinstance(w, dict) and w.get("tu") in reports and type(w.get("lib")) is int
              and isinstance(w.get("chunks"), list)
              and all(isinstance(c, list) and len(c) == 3 and type(c[0]) is int and c[0] >= 0
                      and all(isinstance(n, str) for n in c[1:]) for c in w["chunks"])
              and ("blocks" not in w or (type(w["blocks"]) is int and 1 <= w["blocks"] <= 32)))
        if not ok:
            raise KernelNameError(f"{src.parent / 'manifest.json'}: 'twins' entry {str(w)[:120]} is not a device "
                                  "TU of this kernel with its chunks: rerun the build")
    cands = {w["tu"]: bounds.candidates(w, reports.get(w["tu"]) or {}) for w in twins}
    work = [w for w in twins if cands[w["tu"]]]
    out: dict = {"fatbins": {}, "flags": (), "bounded": {}, "reports": {}}
    if not work:
        return out
    got = compile_tus([src / w["tu"] for w in work], obj_dir, opts, cache, launcher, jobs, timeout_s,
                      extra_flags={w["tu"]: bounds.twin_flags(cands[w["tu"]]) for w in work},
                      suffix="_twin", hb=hb, what="TUs with launch bounds (second compile)")
    libs, chunks = [], []
    for w in work:
        obj, rep, _ = got[w["tu"]]
        out["reports"][w["tu"]] = rep
        ok = bounds.taken(w, cands[w["tu"]], rep or {}, reports.get(w["tu"]) or {})
        if ok:
            libs.append(w["lib"])
            chunks += ok
            out["fatbins"][f"f{int(w['lib'])}.fatbin"] = Path(obj)
            out["bounded"].update({c: cands[w["tu"]][c] for c in ok})
    out["flags"] = bounds.table_flags(libs, chunks)
    return out


def compile_kernel(src: Path, files: list[str], kernels: dict[str, list[str]], obj_dir: Path,
                   archs: list[int], cache: ObjectCache, launcher: list[str] | None, jobs: int = 0,
                   timeout_s: float | None = None, twins: list[dict] | None = None,
                   hb: Heartbeat | None = None) -> dict:
    """Compile one kernel's sources (in `src`, as `stage_sources` wrote them) into what its `.so`
    links: every device TU (`*.cu`) to a fatbin, device code only (`compile_options`; in
    parallel); then its launch table (`<key>_abi.cpp`), which embeds those fatbins (device TU i as
    `f<i>.fatbin`, `emit.device_tus` order), and the generic launcher (`RUNTIME`: the same text for
    every kernel, so an object-cache hit after the first) as host objects. Returns {"objects":
    [table, launcher], "reports": {device TU: ptxas report}, "hits": device TUs from the cache,
    "host_hits": host objects from the cache, "bounded": {chunk: min blocks} of the chunks whose
    bounded twin the table names (`twins`, the manifest's: `compile_twins`)}."""
    tus = device_tus(files)
    tables = [n for n in files if n.endswith(".cpp")]
    if len(tables) != 1:
        raise RuntimeError(f"{src}: expected one launch table among {sorted(files)}")
    dev = compile_options(archs, cache)
    got = compile_tus([src / n for n in tus], obj_dir, dev, cache, launcher, jobs, timeout_s, hb=hb)
    reports = {n: got[n][1] for n in tus}
    check_kernel_names(kernels, reports)
    fatbins = {f"f{i}.fatbin": Path(got[n][0]) for i, n in enumerate(tus)}
    tw = compile_twins(src, twins or [], reports, obj_dir, dev, cache, launcher, jobs, timeout_s, hb=hb)
    if hb is not None:
        hb.status("compiling the launch table and the launcher (host C++)")
    fatbins.update(tw["fatbins"])
    host = host_options(archs)
    table_host = dataclasses.replace(host, extra_flags=host.extra_flags + tw["flags"])

    def one(name: str, inputs: dict, launcher):
        opts = table_host if name == tables[0] else host
        r = cache.compile_cached(src / name, obj_dir / (name.replace(".", "_") + ".o"), opts,
                                 include_dirs=[src], launcher=launcher, timeout_s=timeout_s, inputs=inputs)
        return str(r.obj_path), r.hit

    # the table never goes through a compiler launcher: a launcher keys what it sees (the text, the
    # headers), not what `.incbin` reads, so it could hand back a table of older fatbins (ccache
    # refuses `.incbin`; another might not). Our cache keys the fatbins; the compile takes ~10 ms.
    with ThreadPoolExecutor(2) as ex:
        table, runtime = ex.map(lambda a: one(*a), [(tables[0], fatbins, []), (RUNTIME, {}, launcher)])
    return {"objects": [table[0], runtime[0]], "reports": reports, "hits": sum(1 for n in tus if got[n][2]),
            "host_hits": int(table[1]) + int(runtime[1]), "bounded": tw["bounded"],
            "twin_reports": tw["reports"]}


def _q_kernel_stats(pl: Plan, reports: list[dict]):
    """(chunk, ptxas stats of one arch) for every Q chunk kernel of plan `pl` in `reports` (those of
    a kernel's TUs or probes): its Q chunk kernels are the names of the form `emit.Q_KERNEL_RE`
    (their digest is of their content, not of the kernel key)."""
    for rep in reports:
        for name, per_arch in rep.items():
            m = Q_KERNEL_RE.search(name)
            if m and int(m[1]) < pl.n_chunks:
                for st in per_arch.values():
                    yield int(m[1]), st


def chunk_stats(key: str, pl: Plan, reports: list[dict]) -> tuple[list[int], int]:
    """Per chunk kernel: max registers over archs; total spill bytes of the Q kernels that spill
    (store more than `autotune.SPILL_SLACK_BYTES` on an arch: below that, ptxas's own trade of a
    word for occupancy, which the tune counts as none). `reports` are those of kernel `key`'s TUs
    (or probes)."""
    regs = [0] * pl.n_chunks
    spills = 0
    for c, st in _q_kernel_stats(pl, reports):
        regs[c] = max(regs[c], int(st.get("registers", 0)))
        stores = int(st.get("spill_stores", 0))
        if stores > SPILL_SLACK_BYTES:
            spills += stores + int(st.get("spill_loads", 0))
    return regs, spills


def slack_stores(pl: Plan, reports: list[dict]) -> int:
    """Spill stores (bytes) of the Q kernels that `chunk_stats` counts as none: ptxas's own trade
    of a word or two for occupancy (at most `autotune.SPILL_SLACK_BYTES` on an arch)."""
    return sum(s for _, st in _q_kernel_stats(pl, reports)
               if 0 < (s := int(st.get("spill_stores", 0))) <= SPILL_SLACK_BYTES)


#: a plan of more chunk kernels than PROBE_SAMPLE + 2 is probed through PROBE_SAMPLE evenly spaced
#: chunks and the one of the highest estimated registers. 6 since 0.19.1 (3 before): replaying the
#: tuner on the four H200 sweeps with every chunk's registers (sessions 3, 4, 7, 14;
#: tests/test_autotune.py), 6 chooses what it chooses knowing every chunk's registers on all four,
#: 3 on two (session 14: the sample's Large at 96 ops per chunk, 1.044x slower than 128; session
#: 7: at 64, 1.098x), 5 on three. On the H200 the sample's Large now takes 128 ops per chunk,
#: 1.04x faster (557 -> 581 G); the 3 more chunks a probe of a large Q compiles cost 1.5 s (4%) of
#: the sample's cold build CPU (docs/BENCHMARKS.md "Session 17")
PROBE_SAMPLE = 6


def representatives(q: KernelIR, pl: Plan) -> list[int]:
    """The chunks a probe compiles: all of a small plan; of a large one, PROBE_SAMPLE chunks evenly
    spaced from the first to the last (it writes q), a sample of the plan's register counts, and the
    one with the highest estimated registers (live words and ops: autotune.estimated_regs), the
    likeliest to spill. Compiling 7 chunks instead of a hundred is what makes the tune of a large
    Q cost a few seconds (issue #15). (Before 0.19.1: 3 evenly spaced chunks and the top. Before
    0.18.4: the 3 highest estimates and the last, a sample of the heaviest chunks only: with
    `fill_unprobed` scaling every estimate by their ratio, the sample's Large took 64-op chunks,
    1.17x slower on the H200 than 128 and 1.12x than 96; docs/BENCHMARKS.md "Session 14",
    tests/test_autotune.py.)"""
    n = pl.n_chunks
    if n <= PROBE_SAMPLE + 2:
        return list(range(n))
    est = estimated_regs(q, pl)
    top = min(range(n), key=lambda c: (-est[c], c))
    return sorted({round(i * (n - 1) / (PROBE_SAMPLE - 1)) for i in range(PROBE_SAMPLE)} | {top})


def fill_unprobed(q: KernelIR, pl: Plan, regs: list[int], probed: list[int]) -> list[int]:
    """Registers of the chunks a probe did not compile: the probed chunks' registers as a sample of
    the plan's, handed out by estimate rank (the unprobed chunk of the j-th lowest estimate of m gets
    the (j * k // m)-th lowest of the k measured counts). ptxas's registers are a poor function of
    the IR's live words and ops (correlation 0.64 over the 519 chunk kernels of the session-14 H200
    sweep, 57-212 registers where the estimate says 65-106 on Large's 96-op plan), so a chunk's own
    estimate scaled by a measured ratio (before 0.18.4) put most of Large's chunks one or two
    occupancy steps too low; the sample's distribution keeps the blocks per SM the plan has."""
    if len(probed) == pl.n_chunks:
        return regs
    est = estimated_regs(q, pl)
    vals, seen = sorted(regs[c] for c in probed), set(probed)
    rest = sorted((c for c in range(pl.n_chunks) if c not in seen), key=lambda c: (est[c], c))
    out = list(regs)
    for j, c in enumerate(rest):
        out[c] = vals[j * len(vals) // len(rest)]
    return out


def with_twins(ks: KernelSource, chunks: list[int], regs: list[int], tu: str, got: dict, obj_dir: Path, opts: toolchain.CompileOptions, cache: ObjectCache,
               launcher: list[str] | None) -> list[int]:
    """A chunked probe's registers as cc will run them: the probed chunks whose bounded twin
    (`compile_twins`) spills nothing get the twin's registers.
    With offsets from the launcher (0.20.0) the sample's Large at 128 ops per chunk runs 605 G on
    the H200 against 562 G at 96, which the unbounded registers rank first (docs/BENCHMARKS.md
    "Session 17"); the build bounds 11 of its 43 chunks at 128, 5 of 57 at 96."""
    if ks.plan.n_chunks < 2 or tu not in got:
        return regs
    twin = {"tu": tu, "lib": 0, "chunks": [[c, *q_symbols(ks, c)] for c in sorted(set(chunks))]}
    tw = compile_twins(obj_dir.parent, [twin], {tu: got[tu][1]}, obj_dir, opts, cache, launcher)
    out = list(regs)
    for c, _, tsym in twin["chunks"]:
        if c in tw["bounded"]:      # (bounds.taken: its twin has a report on every arch)
            out[c] = max(int(st.get("registers", 0)) for st in tw["reports"][tu][tsym].values())
    return out


#: a chunked probe whose cost without twins is more than this over the cheapest probe finished
#: before it started gets no twins (`with_twins`): on the sample's Large the twins took 128 ops per
#: chunk 5.1% below its cost without them (8,997 -> 8,535), ahead of 96 (8,761 with or without);
#: Medium's 128-op probe, 13% over its 96, then compiles no twins (1.4 s of nvcc)
TWIN_PROBE_MARGIN = 1.05


def act_tune(key: str, ir_json: str, out: str, work_dir: str, archs: list[int], chunk: int | None,
             slots_cap: int = SLOTS_CAP, launcher: list[str] | None = None,
             settings: dict | None = None, chunk_bounds: bool = True, so_paths: list[str] | None = None) -> bool:
    """Choose the chunking of Q. Tune runs only when its inputs changed, so the kernel's `.so`
    files (`so_paths`; None for `doit emit`, which leaves the provingKey alone) are stale from now
    on: removed first, as `ir` and `cc` do (a tune that fails leaves no `.so` behind). Probes compile the plan's Q chunk kernels (all of a small plan, a
    few `representatives` of a large one) for ONE arch (`tune_arch`), device code only (`nvcc
    -cubin`: cicc + ptxas, no host pass, no fatbinary): their ptxas report is all a probe needs.
    The choice is then compiled once, for every target arch, by `cc` (a spill on another arch costs
    speed there, never the AIR's kernel), in the kernel's own TUs (a small kernel is one TU with its
    expressions and ABI, so probe objects could not be reused anyway: issue #15).
    One exception saves that second compile of a small kernel: given the kernel's `settings`
    (what `emit` hashes with the content ir.json records), when the tune arch is the only target, the estimate expects
    the first probe to end the search (`autotune.first_probe`) and that plan's kernel is one TU
    (besides the generic inverse kernel's, `emit.generic_inverse_tu`, which holds no Q chunk and
    which cc takes from the object cache after its first compile on the machine),
    the first probe compiles that TU exactly as `emit` will write it and `cc` will compile it
    (through the object cache): when it does end the search, `cc` is a cache hit. The single
    kernel's launch bound (`autotune.bound_single`) is its whole TU's bounded twin (0.23.0,
    `emit.launch_table`): the bounded probe is that twin of the whole TU (the first probe's TU, or
    the TU compiled so then), so cc finds the TU and its twin in the cache.
    With `chunk` fixed nothing is compiled; with no toolchain (`archs == []`, `doit emit`
    without nvcc) the cost model's estimate picks the chunking, and tune.json says so."""
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
            print(f"{key}: no nvcc to probe with: chunking estimated by the cost model "
                  f"({res.ops_per_chunk or 'single kernel'} ops per chunk)", file=sys.stderr)
        else:
            cache = ObjectCache()
            arch = tune_arch(archs)
            cubin = toolchain.CompileOptions((arch,), extra_flags=HIDDEN, mode="cubin")
            # when the tune arch is the only target, a probe compiles its chunks as cc will (`-c
            # -fatbin`, the same options; no more ptxas work than `-cubin`), with their bounded
            # twins as cc makes them (`with_twins`). Only other probes are `-cubin` compiles,
            # and only they ask prelude.options about `-cubin` (its decision compiles a probe TU
            # twice on a cold cache: two nvcc runs for nothing when every probe is as cc's).
            # A probe of chunks compiles them with stand-ins for the literals (`probe_literals`):
            # its text, so its registers and the choice, are the shape's, whatever the constants
            as_cc = archs == [arch]
            probe_q = probe_literals(q)
            final = None      # (ops per chunk, device TU) of a first probe compiled as cc will

            def whole_tu(c: int) -> dict[str, str] | None:
                """The kernel's one device TU (besides the generic inverse kernel's) as emit writes it
                at `c` ops per chunk, or None when it has more."""
                files = render(KernelSource(key, q, plan(q, c), cov.exprs, source_hash(d.get("content", ""), settings)))
                tus = [n for n in device_tus(files) if n != XINV_TU]
                return {tus[0]: files[tus[0]]} if len(tus) == 1 else None
            # whether a probe can compile the kernel's TU exactly as cc will (one target arch, the
            # kernel's settings, a Q of one TU)
            whole = settings is not None and archs == [arch] and len(q.ops) <= TU_OPS
            if whole:
                c0, sure = first_probe(q, candidate_plans(q, slots_cap)[0])
                tu = whole_tu(c0) if sure else None
                final = (c0, tu) if tu is not None else None
            n_probed = [0]
            with Heartbeat(f"tune {key} ({len(q.ops)} Q ops, sm_{arch})") as hb:
                sampled: dict[int, list[int]] = {}
                single_slack = [0]      # slack_stores of the unbounded single kernel's probe

                def measured(pl: Plan, min_blocks: int, got: dict) -> tuple[list[int], int]:
                    reports = [r for _, r, _ in got.values()]
                    if pl.ops_per_chunk == 0 and not min_blocks:
                        single_slack[0] = slack_stores(pl, reports)
                    return chunk_stats(key, pl, reports)

                best_cost = [float("inf")]      # the cheapest probe finished so far (twins counted)
                first_tu: dict = {}     # the first probe's whole TU (its name, dir, report)

                def bounded_twin(ks: KernelSource, min_blocks: int) -> tuple[list[int], int]:
                    """The single kernel bounded: the twin cc makes of its whole TU (the first
                    probe's), so that cc finds it too."""
                    name = first_tu["name"]
                    sym, twin_sym = q_symbols(ks, 0)
                    twin = {"tu": name, "lib": 0, "chunks": [[0, sym, twin_sym]], "blocks": min_blocks}
                    tw = compile_twins(first_tu["src"], [twin], {name: first_tu["report"]}, first_tu["src"] / "obj",
                                       compile_options(archs, cache), cache, launcher)
                    rep = tw["reports"].get(name) or {}
                    return chunk_stats(key, ks.plan, [{n: st for n, st in rep.items() if n == twin_sym}])

                def compile_as_cc(tu: dict[str, str], sub: Path, single: bool) -> dict:
                    """The kernel's whole TU `tu` compiled as cc will: compile_tus' result; of the
                    single kernel's plan, it is the TU its bounded twin is made from (`first_tu`)."""
                    got = compile_tus(stage_sources(tu, sub), sub / "obj", compile_options(archs, cache),
                                      cache, launcher)
                    if single:
                        name = next(iter(tu))
                        first_tu.update(name=name, src=sub, report=got[name][1])
                    return got

                def compile_plan(pl: Plan, min_blocks: int = 0) -> tuple[list[int], int]:
                    best_at_start = best_cost[0]    # (neighbours compile at once: both see the same)
                    n_probed[0] += 1
                    ks = KernelSource(key, q, pl, [], "0" * 64, min_blocks=min_blocks)
                    reps = representatives(ks.q, ks.plan)
                    if min_blocks:
                        hb.status(f"probe {n_probed[0]} (the single kernel bounded to {min_blocks} blocks per SM)")
                    else:
                        hb.status(f"probe {n_probed[0]} of at most {MAX_PROBES} (chunk {pl.ops_per_chunk or 'single'}: "
                                  f"{len(reps)} of {ks.plan.n_chunks} kernels)")
                    sub = Path(work_dir) / f"probe_{pl.ops_per_chunk}_b{min_blocks}"
                    # the first probe: compiled as cc will, so that cc finds it if it wins
                    tu = None
                    if final is not None and n_probed[0] == 1 and pl.ops_per_chunk == final[0]:
                        tu = final[1]
                    elif min_blocks and pl.ops_per_chunk == 0 and whole:
                        # the single kernel bounded is its whole TU's twin (emit.launch_table), as cc
                        # will make it. That TU is the first probe's when it was compiled as cc
                        # will; else it is compiled so now (cc then finds both)
                        if not first_tu and (t0 := whole_tu(0)) is not None:
                            compile_as_cc(t0, Path(work_dir) / "probe_0_whole", True)
                        if first_tu:
                            return bounded_twin(ks, min_blocks)
                    if tu is not None:
                        got = compile_as_cc(tu, sub, pl.ops_per_chunk == 0)
                        regs, spills = measured(ks.plan, min_blocks, got)
                        if chunk_bounds and not spills:
                            regs = with_twins(ks, list(range(ks.plan.n_chunks)), regs, next(iter(tu)), got,
                                              sub / "obj", compile_options(archs, cache), cache, launcher)
                        if not spills and not min_blocks:
                            best_cost[0] = min(best_cost[0], cost(q, pl, regs))
                        return regs, spills
                    if len(reps) < ks.plan.n_chunks:
                        sampled[pl.ops_per_chunk] = reps
                    ks = KernelSource(key, probe_q, pl, [], "0" * 64, min_blocks=min_blocks)
                    tus = stage_sources(render_probe(ks, reps), sub)
                    got = compile_tus(tus, sub / "obj", compile_options(archs, cache) if as_cc
                                      else prelude.options(cubin, cache), cache, launcher)
                    regs, spills = measured(ks.plan, min_blocks, got)
                    if chunk_bounds and as_cc and not spills and \
                            cost(q, pl, fill_unprobed(ks.q, ks.plan, regs, reps)) <= TWIN_PROBE_MARGIN * best_at_start:
                        regs = with_twins(ks, reps, regs, tus[0].name, got, sub / "obj",
                                          compile_options(archs, cache), cache, launcher)
                    regs = fill_unprobed(ks.q, ks.plan, regs, reps)
                    if not spills and not min_blocks:
                        best_cost[0] = min(best_cost[0], cost(q, pl, regs))
                    return regs, spills

                def bounded(b: int) -> tuple[list[int], int]:
                    return compile_plan(plan(q, 0), min_blocks=b)
                res = tune(q, compile_plan, slots_cap=slots_cap, compile_bounded=bounded)
                bound_single(q, res, bounded, single_slack[0])
                res.arch = arch
                doc["sampled"] = {str(k): v for k, v in sorted(sampled.items())}
            shutil.rmtree(work_dir, ignore_errors=True)
        doc.update(res.to_json())
        _write_json(Path(out), doc)
    except toolchain.CompileError as e:
        log.error("autotune of kernel %s failed: %s", key, _why(e))
        return False
    except OSError as e:   # disk full, no permission: this kernel fails, the others go on
        log.error("autotune of kernel %s failed: %s", key, e)
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
                  key, ", ".join(airs), _oserr(e))
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
        log.error("compile of kernel %s (AIRs: %s) failed: %s", key, ", ".join(airs), _why(e))
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
            log.warning("removed %s: the temp file of a killed build", _shown(t))
        if o["skip"]:
            so.unlink(missing_ok=True)
            _write_json(Path(stamp), {"format": FORMAT, "air": rel, "skip": o["skip"], "so": None})
            return True
        try:
            with Heartbeat(f"link {rel}") as hb:
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
        log.error("link of %s failed: %s", rel, _why(e))
        return False
    return True


def link_cached(objs: list[Path], so: Path, opts: toolchain.CompileOptions, launcher, timeout_s) -> bool:
    """Link through the object cache: key = the objects' digests, nvcc version, link flags, the
    launcher. A rebuild into an empty build dir with a warm cache then runs no nvcc at all.
    Returns hit. `EXPS_LINK_CACHE=0` links every time (the tests that count linker runs set it)."""
    launcher = toolchain.launcher_from_env() if launcher is None else list(launcher)
    if not toolchain.knobs().link_cache:
        toolchain.link_shared(objs, so, opts, launcher=launcher, timeout_s=timeout_s)
        return False
    cache = ObjectCache()
    digests = "\n".join(hashlib.sha256(Path(x).read_bytes()).hexdigest() for x in objs)
    key = cache.key("link\n" + digests, {}, toolchain.nvcc_version(toolchain.find_nvcc()).text,
                    list(toolchain.LINK_FLAGS), toolchain.knobs().keyed_env, launcher=launcher)
    got = cache.get(key)
    if got is not None:
        so.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(so, got[0])
        return True
    toolchain.link_shared(objs, so, opts, launcher=launcher, timeout_s=timeout_s)
    try:    # the .so is placed: a full or read-only cache is a warning (ObjectCache.put), not a failure
        cache.put(key, so.read_bytes(), {})
    except OSError as e:
        log.warning("link cache: cannot store %s: %s", so.name, _oserr(e))
    return False


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
