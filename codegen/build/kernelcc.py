"""A kernel's sources to the objects its `.so` links: device TUs to fatbins (in parallel, through
the object cache), the bounded twins of a chunked Q's TUs, the launch table and the generic
launcher as host objects, and the link of a `.so` through the cache. The `cc` and `link` stages
(actions.py) and the tune's probes (probes.py) compile through here.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from codegen.build import bounds, prelude, toolchain
from codegen.build.cache import ObjectCache, atomic_write
from codegen.build.heartbeat import Heartbeat
from codegen.emit import COMMON_FILES, RUNTIME, device_tus
from codegen.resources import TEMPLATES

log = logging.getLogger("exps_codegen")
HIDDEN = ("-Xcompiler", "-fvisibility=hidden")


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
    "bounded": {chunk: min blocks} of the chunks whose
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
            "bounded": tw["bounded"], "twin_reports": tw["reports"]}


def link_cached(objs: list[Path], so: Path, opts: toolchain.CompileOptions, launcher, timeout_s) -> bool:
    """Link through the object cache: key = the objects' digests, nvcc version, host compiler,
    link flags, the launcher. A rebuild into an empty build dir with a warm cache then runs no nvcc at all.
    Returns hit. `EXPS_LINK_CACHE=0` links every time (the tests that count linker runs set it)."""
    launcher = toolchain.launcher_from_env() if launcher is None else list(launcher)
    if not toolchain.knobs().link_cache:
        toolchain.link_shared(objs, so, opts, launcher=launcher, timeout_s=timeout_s)
        return False
    cache = ObjectCache()
    digests = "\n".join(hashlib.sha256(Path(x).read_bytes()).hexdigest() for x in objs)
    key = cache.key("link\n" + digests, {}, toolchain.nvcc_version(toolchain.find_nvcc()).text,
                    list(toolchain.LINK_FLAGS), toolchain.knobs().keyed_env, launcher=launcher,
                    host_compiler_text=toolchain.host_compiler_text())
    got = cache.get(key)
    if got is not None:
        so.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(so, got[0])
        return True
    toolchain.link_shared(objs, so, opts, launcher=launcher, timeout_s=timeout_s)
    try:    # the .so is placed: a full or read-only cache is a warning (ObjectCache.put), not a failure
        cache.put(key, so.read_bytes(), {})
    except OSError as e:
        log.warning("link cache: cannot store %s: %s", so.name, e.strerror or e)
    return False
