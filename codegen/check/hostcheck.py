"""Host check: the very same generated translation units, compiled as host C++ by g++, called
through the exported C ABI (ctypes) exactly as the prover calls the `.so`, compared word for word
with the independent numpy oracle (`reference.py`).

Inputs are raw u64 words that mix uniform words, words >= p, 0, 1, p, p-1, EPS neighbours and small
integers / 0-1 selectors, as real traces do (the two encodings of a value exist only below 2^32).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from codegen.check import reference
from codegen import operands
from codegen.build import knobs as _knobs
from codegen.emit import COMMON_FILES, RUNTIME, ExprKernel, KernelSource, render
from codegen.coverage import Coverage
from codegen.model import StarkInfo
from codegen.plan import plan
from codegen.resources import TEMPLATES

P = 0xFFFFFFFF00000001
EPS = 0xFFFFFFFF
EDGE = np.array([0, 1, 2, 3, EPS - 1, EPS, EPS + 1, P - 2, P - 1, P, P + 1, P + 2, (1 << 63),
                 (1 << 64) - 2, (1 << 64) - 1, 1 << 32, (1 << 32) - 2], dtype=np.uint64)
POISON = np.uint64(0xDEC0DEDDEC0DEDDE)
MODES = {0: "WRITE", 1: "MUL_INV", 2: "WRITE_INV"}


def raw_words(rng: np.random.Generator, shape) -> np.ndarray:
    """Raw u64 test words: 40% uniform, 20% edge values, 20% small ints, 20% 0/1 selectors."""
    n = int(np.prod(shape)) if shape != () else 1
    uni = rng.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False)
    edge = EDGE[rng.integers(0, len(EDGE), size=n)]
    small = rng.integers(0, 17, size=n).astype(np.uint64)
    sel = rng.integers(0, 2, size=n).astype(np.uint64)
    pick = rng.random(n)
    out = np.where(pick < 0.4, uni, np.where(pick < 0.6, edge, np.where(pick < 0.8, small, sel)))
    return out.reshape(shape)


class _Steps(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in (
        "trace", "aux_trace", "publicInputs", "proofValues", "challenges", "airgroupValues",
        "airValues", "evals", "xDivXSub", "pConstPolsAddress", "pConstPolsExtendedTreeAddress",
        "pCustomCommitsFixed")]


class HostBuildError(RuntimeError):
    pass


HOST_FLAGS = ("-std=c++17", "-fPIC", "-Wall", "-Wextra", "-fvisibility=hidden", "-DEXPS_HOSTCHECK")
#: TUs with more generated lines than this compile at -O0: the host check tests semantics, not
#: speed, and g++ -O1 on a 100,000-op straight-line function takes minutes
O0_LINES = 20000


def _host_object(cxx: str, src: Path, workdir: Path, header_digest: str, defines: tuple[str, ...] = ()) -> Path:
    """One TU -> object, through a content cache (TU text, headers, compiler identity, flags)."""
    import hashlib
    text = src.read_bytes()
    opt = "-O0" if text.count(b"\n") > O0_LINES else "-O1"
    flags = [*HOST_FLAGS, opt, *defines]
    ident = _cxx_identity(cxx)
    key = hashlib.sha256(b"\0".join([text, header_digest.encode(), ident.encode(),
                                      " ".join(flags).encode()])).hexdigest()
    root = _knobs.read().cache_dir or Path("~/.cache/exps-codegen").expanduser()
    cached = root / "host" / key[:2] / f"{key}.o"
    obj = workdir / (src.name.replace(".", "_") + ".o")
    if cached.is_file():
        shutil.copyfile(cached, obj)
        return obj
    argv = [cxx, *flags, "-c", "-I", str(workdir), "-x", "c++", str(src), "-o", str(obj)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise HostBuildError(f"host build failed ({' '.join(argv)}):\n{p.stderr[-4000:]}")
    if p.stderr.strip():
        raise HostBuildError(f"host build warnings:\n{p.stderr[-4000:]}")
    try:
        from codegen.build.fsutil import atomic_write
        cached.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cached, obj.read_bytes())
    except OSError:
        pass                       # a cache is an optimization
    return obj


_CXX_IDS: dict[str, str] = {}


def _cxx_identity(cxx: str) -> str:
    if cxx not in _CXX_IDS:
        p = subprocess.run([cxx, "--version"], capture_output=True, text=True)
        _CXX_IDS[cxx] = p.stdout.strip() or cxx
    return _CXX_IDS[cxx]


def build_host_library(files: dict[str, str], workdir: Path, cxx: str | None = None,
                       defines: tuple[str, ...] = ()) -> Path:
    """Write a kernel's sources (`emit.render`: device TUs and launch table) and compile them with
    g++ (`-DEXPS_HOSTCHECK`) into one shared library with the generic launcher (templates/
    exps_runtime.cpp, which then calls the kernels' host forms): each TU on its own (in parallel,
    one per core) through a content cache, then one link. Any warning fails. `defines`: extra
    -D flags (tests: -DEXPS_FORCE_EXACT runs every Q row through the exact program). A common
    file (`emit.COMMON_FILES`) in `files` replaces the template's (tests: a mutated launcher)."""
    from concurrent.futures import ThreadPoolExecutor
    import hashlib
    workdir.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    for name in COMMON_FILES:
        data = files[name].encode() if name in files else (TEMPLATES / name).read_bytes()
        (workdir / name).write_bytes(data)
        h.update(name.encode() + b"\0" + data + b"\0")
    header_digest = h.hexdigest()
    srcs = [workdir / RUNTIME]
    for name, text in files.items():
        if name in COMMON_FILES:
            continue
        (workdir / name).write_text(text)
        srcs.append(workdir / name)
    out = workdir / "hostcheck.so"
    cxx = cxx or _knobs.read().cxx
    with ThreadPoolExecutor(max(1, min(len(srcs), os.cpu_count() or 1))) as ex:
        objs = list(ex.map(lambda s: _host_object(cxx, s, workdir, header_digest, tuple(defines)), srcs))
    argv = [cxx, "-shared", "-fPIC", *map(str, objs), "-o", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise HostBuildError(f"host link failed ({' '.join(argv)}):\n{p.stderr[-4000:]}")
    return out


def _load(so: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    u64, vp = ctypes.c_uint64, ctypes.c_void_p
    lib.exps_launch.argtypes = [vp, vp, vp, u64, u64, u64, u64, u64, u64, vp]
    lib.exps_launch.restype = None
    lib.exps_min_scratch.restype = ctypes.c_ulonglong
    lib.exps_expr_covered.argtypes = [ctypes.c_ulonglong]
    lib.exps_expr_covered.restype = ctypes.c_int
    ull = ctypes.c_ulonglong
    lib.exps_launch_expr.argtypes = [ull, vp, vp, ull, ull, ull, ull, ull, ull, ull, ull, ull, ull,
                                     ctypes.c_uint, vp]
    lib.exps_launch_expr.restype = ctypes.c_int
    lib.exps_source_hash.restype = ctypes.c_char_p
    lib.exps_emitter_version.restype = ctypes.c_char_p
    return lib



def stage_cols(si: StarkInfo) -> dict[int, int]:
    cols: dict[int, int] = {s: 0 for s in range(1, si.n_stages + 2)}
    for p in si.cm_pols:
        cols[p.stage] = max(cols.get(p.stage, 0), p.stage_pos + p.dim)
    for s in cols:
        cols[s] = max(cols[s], si.section_cols.get(f"cm{s}", 0))
    return cols


def _scalars(si: StarkInfo, rng) -> dict[str, np.ndarray]:
    def n3(stages):
        return sum(operands.value_slots(s) for s in stages)
    sizes = {"publics": si.n_publics, "challenges": 3 * si.n_challenges, "evals": 3 * si.n_evals,
             "airvalues": n3(si.airvalue_stages), "airgroupvalues": n3(si.airgroupvalue_stages),
             "proofvalues": n3(si.proofvalue_stages)}
    return {k: raw_words(rng, (max(v, 1),)) for k, v in sizes.items()}


class HostMem:
    """Memory backend of the host check: numpy arrays, host pointers (gpucheck has a CuPy twin)."""

    name = "host"

    def put(self, a: np.ndarray):
        return np.ascontiguousarray(a, dtype=np.uint64).copy()

    def ptr(self, h) -> int:
        return h.ctypes.data if h.size else 0

    def get(self, h) -> np.ndarray:
        return np.array(h, dtype=np.uint64)

    def steps(self, fields: dict[str, int]):
        st = _Steps(**fields)
        return ctypes.addressof(st), st

    def sync(self) -> None:
        pass


STEP_FIELDS = [f for f, _ in _Steps._fields_]


@dataclass
class Buffers:
    """Inputs laid out as the prover lays them (one aux_trace, const arrays, scalars), as numpy
    arrays; `bind` puts them in a memory backend and builds the StepsParams there."""

    aux: np.ndarray
    off_ext: dict[int, int]
    off_trace: dict[int, int]
    off_zi: int
    const_ext: np.ndarray
    const_trace: np.ndarray
    scalars: dict[str, np.ndarray]
    steps: int = 0
    _keep: list = field(default_factory=list)

    def domain(self, si: StarkInfo, extended: bool, D: int) -> reference.DomainData:
        cols = stage_cols(si)
        offs = self.off_ext if extended else self.off_trace
        cm = {s: self.aux[offs[s]: offs[s] + c * D].reshape(c, D) for s, c in cols.items()}
        cst = self.const_ext if extended else self.const_trace
        return reference.DomainData(
            n_rows=D, cm=cm, const=cst.reshape(-1, D) if cst.size else np.zeros((0, D), np.uint64),
            zi=self.aux[self.off_zi: self.off_zi + D] if extended else None,
            publics=self.scalars["publics"], challenges=self.scalars["challenges"],
            airvalues=self.scalars["airvalues"], airgroupvalues=self.scalars["airgroupvalues"],
            proofvalues=self.scalars["proofvalues"], evals=self.scalars["evals"])

    def bind(self, mem) -> int:
        """Copy the inputs into `mem`; returns the StepsParams pointer the ABI takes."""
        h = {"aux": mem.put(self.aux), "cx": mem.put(self.const_ext), "ct": mem.put(self.const_trace)}
        h.update({k: mem.put(v) for k, v in self.scalars.items()})
        aux = mem.ptr(h["aux"])
        fields = {"aux_trace": aux, "trace": aux + 8 * self.off_trace[1],
                  "pConstPolsExtendedTreeAddress": mem.ptr(h["cx"]),
                  "pConstPolsAddress": mem.ptr(h["ct"]),
                  "publicInputs": mem.ptr(h["publics"]), "challenges": mem.ptr(h["challenges"]),
                  "evals": mem.ptr(h["evals"]), "airValues": mem.ptr(h["airvalues"]),
                  "airgroupValues": mem.ptr(h["airgroupvalues"]),
                  "proofValues": mem.ptr(h["proofvalues"])}
        self.steps, keep = mem.steps(fields)
        self._keep = [h, keep]
        return self.steps


def ext_offsets(si: StarkInfo, n_ext: int) -> tuple[dict[int, int], int, int]:
    """aux_trace layout of the extended domain: (offset of each cm stage, offset of zi, end)."""
    off, pos = {}, 0
    for s, c in stage_cols(si).items():
        off[s] = pos
        pos += c * n_ext
    return off, pos, pos + n_ext


def make_buffers(si: StarkInfo, n_ext: int, n: int, rng) -> Buffers:
    cols = stage_cols(si)
    off_ext, off_zi, pos = ext_offsets(si, n_ext)
    off_trace = {}
    for s, c in cols.items():
        off_trace[s] = pos
        pos += c * n
    aux = raw_words(rng, (pos,))
    return Buffers(aux, off_ext, off_trace, off_zi, raw_words(rng, (si.n_constants * n_ext,)),
                   raw_words(rng, (si.n_constants * n,)), _scalars(si, rng))


@dataclass
class CheckResult:
    q_words: int = 0
    expr_checks: int = 0
    expr_words: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _first_diff(got: np.ndarray, want: np.ndarray) -> str:
    idx = np.argwhere(got != want)
    i = tuple(int(x) for x in idx[0])
    return f"{len(idx)} words differ, first at {i}: got {int(got[i]):#x} want {int(want[i]):#x}"


def run_q(lib: ctypes.CDLL, buf: Buffers, steps: int, mem, n_ext: int, scratch_elems: int = 0) -> np.ndarray:
    """One `exps_launch` over `n_ext` rows into a poisoned q (and poisoned scratch of
    `scratch_elems` words): the 3 x n_ext words it left."""
    q = mem.put(np.full(3 * n_ext, POISON, dtype=np.uint64))
    scratch = mem.put(np.full(max(scratch_elems, 1), POISON, dtype=np.uint64))
    lib.exps_launch(steps, mem.ptr(q), mem.ptr(scratch), scratch_elems, n_ext,
                    buf.off_ext[1], buf.off_ext.get(2, 0), buf.off_ext.get(3, 0), buf.off_zi, None)
    mem.sync()
    return mem.get(q).reshape(3, n_ext)


def check_kernel(si: StarkInfo, si_json: dict, ei_json: dict, ks: KernelSource, lib: ctypes.CDLL,
                 seed: int = 1, min_rows_ext: int = 1024, min_rows: int = 64,
                 max_rows: int = 1 << 13, mem=None, q_only: bool = False) -> CheckResult:
    """Run Q (ample and tight scratch) and every covered expression in every store mode (`q_only`:
    Q only)."""
    rng = np.random.default_rng(seed)
    res = CheckResult()
    n_ext = min(max(1 << si.n_bits_ext, min_rows_ext), max(max_rows, min_rows_ext))
    n = min(max(1 << si.n_bits, min_rows), max(max_rows, min_rows))
    buf = make_buffers(si, n_ext, n, rng)
    mem = mem or HostMem()
    steps = buf.bind(mem)
    # ---- Q
    want = reference.eval_q(si_json, ei_json, buf.domain(si, True, n_ext))
    slots = ks.plan.total_slots
    # chunked: scratch for more than every row (the wave stops at NExt), 3 blocks (a partly filled
    # last wave unless NExt / 256 is a multiple of 3) and 1 block (one wave per 256 rows)
    w = max(slots, 1)
    for scratch_elems in ((2 * w * n_ext, 3 * w * 256, w * 256) if ks.plan.n_chunks > 1 else (0,)):
        got = run_q(lib, buf, steps, mem, n_ext, scratch_elems)
        if not np.array_equal(got, want):
            res.mismatches.append(f"Q (scratch {scratch_elems}): {_first_diff(got, want)}")
        res.q_words += got.size
    # ---- trace-domain expressions
    for x in ([] if q_only else ks.exprs):
        _check_expr(si, si_json, ei_json, x, lib, buf, n, rng, res, mem, steps)
    return res


def _expr_json(ei_json: dict, exp_id: int) -> dict:
    return next(e for e in ei_json["expressionsCode"] if e["expId"] == exp_id)


#: every (mode, destDim) exps_launch_expr can be called with (ARCHITECTURE.md "Store modes")
EXPR_CASES = [(mode, dest_dim, dest_expr) for dest_dim in (1, 3) for mode in (0, 1, 2) for dest_expr in (0, 1)]


def _check_expr(si, si_json, ei_json, x: ExprKernel, lib, buf: Buffers, n: int, rng, res: CheckResult,
                mem, steps: int):
    """One covered expression: every mode x destDim x dest kind against the oracle's store, with
    the numerator dim the oracle derives from the raw hintsInfo (not the kernel's `num1`); then a
    call with N == 0, which must report success and write nothing."""
    exp_id = x.ir.exp_id
    if not lib.exps_expr_covered(exp_id):
        res.mismatches.append(f"expr {exp_id}: exps_expr_covered says 0")
        return
    try:
        num_dim = reference.mul_inv_numerator_dim(ei_json, exp_id)
    except reference.OracleRefusal as e:
        res.mismatches.append(f"expr {exp_id}: covered, but the oracle refuses it: {e}")
        return
    v = reference.eval_expression(si_json, _expr_json(ei_json, exp_id), buf.domain(si, False, n), False)
    for mode, dest_dim, dest_expr in EXPR_CASES:
        stage_pos = int(rng.integers(0, 3)) if not dest_expr else 0
        n_cols = stage_pos + dest_dim + 1
        before = raw_words(rng, (dest_dim, n))
        if mode == 1 and num_dim == 1 and dest_dim == 3 and not dest_expr:
            before[1:] = 0          # what WRITE of the dim-1 numerator left there (expr: any words)
        if dest_expr:
            buf_dest = before.T.copy().reshape(-1)
        else:
            buf_dest = np.full((n_cols, n), POISON, dtype=np.uint64)
            buf_dest[stage_pos: stage_pos + dest_dim] = before
            buf_dest = buf_dest.reshape(-1)
        if mode == 0:   # WRITE must not read the destination: poison it
            if dest_expr:
                buf_dest[:] = POISON
            else:
                buf_dest.reshape(n_cols, n)[stage_pos: stage_pos + dest_dim] = POISON
        scalar = int(raw_words(rng, ()))
        d_dest = mem.put(buf_dest)
        ok = lib.exps_launch_expr(exp_id, steps, mem.ptr(d_dest), n, n,
                                  buf.off_trace[1], buf.off_trace[2], buf.off_trace.get(3, 0),
                                  mode, scalar, stage_pos, n_cols, dest_dim, dest_expr, None)
        mem.sync()
        buf_dest = mem.get(d_dest)
        label = f"expr {exp_id} {MODES[mode]} destDim {dest_dim} {'expr' if dest_expr else 'col'}"
        if ok != 1:
            res.mismatches.append(f"{label}: exps_launch_expr returned {ok}")
            continue
        want = reference.store(mode, v, before, scalar, num_dim)
        if dest_expr:
            got = buf_dest.reshape(n, dest_dim).T
        else:
            full = buf_dest.reshape(n_cols, n)
            got = full[stage_pos: stage_pos + dest_dim]
            others = np.delete(full, range(stage_pos, stage_pos + dest_dim), axis=0)
            if others.size and not np.all(others == POISON):
                res.mismatches.append(f"{label}: wrote outside its columns")
        if not np.array_equal(got, want):
            res.mismatches.append(f"{label}: {_first_diff(got, want)}")
        res.expr_checks += 1
        res.expr_words += got.size
    # N == 0: nothing to write, and the call must still count as handled (the prover ignores 0)
    empty = mem.put(np.full(4, POISON, dtype=np.uint64))
    ok = lib.exps_launch_expr(exp_id, steps, mem.ptr(empty), 0, n, buf.off_trace[1], buf.off_trace[2],
                              buf.off_trace.get(3, 0), 1, 0, 0, 4, 3, 0, None)
    mem.sync()
    untouched = bool(np.all(mem.get(empty) == POISON))
    if ok != 1 or not untouched:
        res.mismatches.append(f"expr {exp_id} N 0: returned {ok}, dest {'untouched' if untouched else 'written'}")
    res.expr_checks += 1


def default_ops_per_chunk(n_ops: int) -> int:
    """The chunking the host check uses when none is given: single kernel up to 512 ops."""
    return 0 if n_ops <= 512 else 256


def kernel_source(key: str, cov: Coverage, ops_per_chunk: int | None = None,
                  source_hash: str = "0" * 64) -> KernelSource:
    assert cov.q is not None
    opc = default_ops_per_chunk(len(cov.q.ops)) if ops_per_chunk is None else ops_per_chunk
    return KernelSource(key, cov.q, plan(cov.q, opc), list(cov.exprs), source_hash)


def check_air(key: str, si: StarkInfo, si_json: dict, ei_json: dict, cov: Coverage,
              ops_per_chunk: int | None = None, seed: int = 1, workdir: Path | None = None) -> CheckResult:
    ks = kernel_source(key, cov, ops_per_chunk)
    files = render(ks)
    with tempfile.TemporaryDirectory(prefix="exps-hostcheck-", dir=workdir) as d:
        so = build_host_library(files, Path(d))
        lib = _load(so)
        return check_kernel(si, si_json, ei_json, ks, lib, seed=seed)
