"""Build and call the bytecode interpreter (`bench/interp.cu`) through ctypes; the Q input layout.

* :func:`build_gpu` -> ``bench/libinterp.so`` (nvcc, sm_90 by default) and the ptxas report;
* :func:`build_host` -> the same source compiled as host C++ (g++), for CPU checks;
* :class:`QLayout` -> where Q's inputs live: one ``aux_trace`` holding the extended sections
  ``cm1 | cm2 | cm3`` (ColMajor, ``NExt`` rows each column) then the everyRow ``zi`` column, as
  ``codegen.check.hostcheck.make_buffers`` lays out the extended part; the const tree is its own buffer;
* :func:`host_q` -> run the interpreter on the CPU over numpy inputs;
* :class:`TraceLayout` / :func:`host_expr` -> the same for one trace-domain expression (spec §4):
  ``cm1 | cm2 | cm3`` at N rows each, ``trace`` = its cm1 part, the const columns apart, and the
  result stored as ``exps_launch_expr`` stores it (WRITE / MUL_INV / WRITE_INV into a stage column
  or an expression buffer).
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from .bytecode import Bytecode, buffer_commit_size

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCE = HERE / "interp.cu"
TEMPLATES = REPO / "templates"
GPU_LIB = HERE / "libinterp.so"

Json = dict[str, Any]

# flags of interp_launch (interp.cu)
TMP_SHARED = 1
NO_STAGING = 2
INTERP_ERRORS = {-1: "NExt not a power of two", -2: "too many openings", -3: "scratch too small",
                 -4: "type codes beyond the table", -5: "null pointer or no ops",
                 -6: "store mode / destDim exps_launch_expr never computes"}

STEP_FIELDS = ("trace", "aux_trace", "publicInputs", "proofValues", "challenges", "airgroupValues",
               "airValues", "evals", "xDivXSub", "pConstPolsAddress", "pConstPolsExtendedTreeAddress",
               "pCustomCommitsFixed")


class BuildError(RuntimeError):
    pass


def nvcc_path() -> str:
    for cand in (os.environ.get("EXPS_NVCC"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise BuildError("nvcc not found (PATH, $EXPS_NVCC, $CUDA_HOME/bin)")


def gpu_build_argv(out: Path, arch: str = "90", nvcc: str | None = None) -> list[str]:
    return [nvcc or nvcc_path(), f"-arch=sm_{arch}", "-O3", "-Xcompiler", "-fPIC", "-shared",
            "-DGL64_PARTIALLY_REDUCED", "-I", str(TEMPLATES), "-Xcompiler", "-Wall,-Wextra",
            "-Xptxas", "-v", str(SOURCE), "-o", str(out)]


def build_gpu(out: Path = GPU_LIB, arch: str = "90", force: bool = False,
              strict: bool = False) -> tuple[Path, str]:
    """Compile interp.cu into a shared library; returns (path, compiler output). Rebuilt when the
    source or the header is newer than the library, the arch changed, or ``force``. ``strict``:
    warnings raise (the tests); otherwise they are in the returned text."""
    out = Path(out)
    deps = [SOURCE, TEMPLATES / "gen_common.cuh"]
    log = Path(str(out) + ".log")
    stamp = f"arch=sm_{arch}\n"
    if (not force and out.is_file() and log.is_file() and log.read_text().startswith(stamp)
            and all(out.stat().st_mtime >= d.stat().st_mtime for d in deps)):
        return out, log.read_text()[len(stamp):]
    argv = gpu_build_argv(out, arch)
    p = subprocess.run(argv, capture_output=True, text=True)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        raise BuildError(f"{' '.join(argv)} failed (rc {p.returncode}):\n{text[-4000:]}")
    if strict and re.search(r"warning", text, re.I):
        raise BuildError(f"{' '.join(argv)} printed warnings:\n{text[-4000:]}")
    log.write_text(stamp + text)
    return out, text


def ptxas_registers(text: str, kernel: str = "interp_q_kernel") -> int | None:
    """Registers of `kernel` (interp_q_kernel: Q; interp_expr_kernel: trace-domain expressions) in a
    ptxas -v report; the first count of the report when no entry of that name is in it."""
    m = re.search(r"Compiling entry function '[^']*" + re.escape(kernel) + r"[^']*'.*?Used (\d+) registers",
                  text, re.S)
    m = m or re.search(r"Used (\d+) registers", text)
    return int(m[1]) if m else None


def build_host(out: Path, cxx: str | None = None) -> Path:
    """The same source as host C++ (g++ -x c++), exporting interp_host_run."""
    cxx = cxx or os.environ.get("CXX", "g++")
    argv = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-DGL64_PARTIALLY_REDUCED",
            "-I", str(TEMPLATES), "-x", "c++", str(SOURCE), "-o", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0 or p.stderr.strip():
        raise BuildError(f"{' '.join(argv)}:\n{p.stderr[-4000:]}")
    return Path(out)


_U32, _U64, _I32, _VP = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p
_COMMON = [_VP, _VP, _VP, _VP, _U32, _U32, _U32, _VP, _VP, _U64, _U64, _U64, _U64, _U64, _U64, _U64,
           _I32, _I32, _I32, _VP, _I32]
# interp_host_expr_run / interp_expr_launch: P, ops, args, numbers, nOps, nTemp1, nTemp3, dest, scratch,
# scratchElems, N, nBlocks, off_cm1..3, nStages, nCustom, openings, nOpenings, destDomain, mode, scalar,
# stagePos, destDim, destExpr, num1
_EXPR = [_VP, _VP, _VP, _VP, _U32, _U32, _U32, _VP, _VP, _U64, _U64, _U64, _U64, _U64, _U64,
         _I32, _I32, _VP, _I32, _U64, _U64, _U64, _U64, _U64, ctypes.c_uint, ctypes.c_uint]


def load_host(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.interp_host_run.argtypes = _COMMON
    lib.interp_host_run.restype = ctypes.c_int
    lib.interp_scratch_per_block.argtypes = [_U64, _U32, _U32]
    lib.interp_scratch_per_block.restype = ctypes.c_ulonglong
    lib.interp_host_expr_run.argtypes = _EXPR
    lib.interp_host_expr_run.restype = ctypes.c_int
    return lib


def load_gpu(path: Path) -> ctypes.CDLL:
    lib = load_host(path)
    lib.interp_launch.argtypes = _COMMON + [ctypes.c_uint, _VP, _VP]
    lib.interp_launch.restype = ctypes.c_int
    lib.interp_config.argtypes = [_U32, _U32, _U32, _U64, _U64, _U64, _I32, _I32, ctypes.c_uint,
                                  ctypes.POINTER(ctypes.c_ulonglong)]
    lib.interp_config.restype = ctypes.c_int
    lib.interp_kernel_attrs.argtypes = [ctypes.POINTER(ctypes.c_int)] * 3
    lib.interp_kernel_attrs.restype = ctypes.c_int
    lib.interp_expr_launch.argtypes = _EXPR + [ctypes.c_uint, _VP, _VP]
    lib.interp_expr_launch.restype = ctypes.c_int
    lib.interp_kernel_attrs_of.argtypes = [ctypes.c_int] + [ctypes.POINTER(ctypes.c_int)] * 3
    lib.interp_kernel_attrs_of.restype = ctypes.c_int
    return lib


# ------------------------------------------------------------------------------- layout
def stage_cols(si: Json) -> dict[int, int]:
    """Element columns per committed stage 1..nStages+1 (as codegen.check.hostcheck.stage_cols)."""
    n = si["nStages"]
    cols = {s: 0 for s in range(1, n + 2)}
    for p in si["cmPolsMap"]:
        cols[p["stage"]] = max(cols.get(p["stage"], 0), p["stagePos"] + p["dim"])
    for s in cols:
        cols[s] = max(cols[s], si.get("mapSectionsN", {}).get(f"cm{s}", 0))
    return cols


def _n3(values_map: list[Json]) -> int:
    return sum(1 if e["stage"] == 1 else 3 for e in values_map)


SCALAR_PAD = 64   # ids beyond a map (diff_buses airgroupvalue 1) still read inside the buffer


@dataclass
class QLayout:
    """Where Q's inputs are, in elements (u64)."""

    n_ext: int
    cols: dict[int, int]          # stage -> element columns
    off_cm: dict[int, int]        # stage -> offset in aux
    off_zi: int
    aux_elems: int
    n_const: int
    scalar_sizes: dict[str, int]  # StepsParams field -> elements

    @classmethod
    def of(cls, si: Json, n_ext: int) -> "QLayout":
        cols = stage_cols(si)
        off, pos = {}, 0
        for s, c in cols.items():
            off[s] = pos
            pos += c * n_ext
        off_zi = pos
        pos += n_ext * max(1, len(si.get("boundaries", [])))
        sizes = {"publicInputs": si.get("nPublics", len(si.get("publicsMap", []))),
                 "challenges": 3 * len(si.get("challengesMap", [])),
                 "evals": 3 * len(si.get("evMap", [])),
                 "airValues": _n3(si.get("airValuesMap", [])),
                 "airgroupValues": _n3(si.get("airgroupValuesMap", [])),
                 "proofValues": _n3(si.get("proofValuesMap", []))}
        sizes = {k: v + SCALAR_PAD for k, v in sizes.items()}
        return cls(n_ext, cols, off, off_zi, pos, si["nConstants"], sizes)

    def offsets(self) -> tuple[int, int, int, int]:
        return self.off_cm.get(1, 0), self.off_cm.get(2, 0), self.off_cm.get(3, 0), self.off_zi

    def input_bytes(self) -> int:
        return 8 * (self.aux_elems + self.n_const * self.n_ext + sum(self.scalar_sizes.values()))


def openings_array(si: Json) -> np.ndarray:
    return np.array(si["openingPoints"], dtype=np.int64)


def blowup(si: Json) -> int:
    ss = si["starkStruct"]
    return 1 << (ss["nBitsExt"] - ss["nBits"])


def n_custom(si: Json) -> int:
    return buffer_commit_size(si) - (1 + si["nStages"] + 3)


# ------------------------------------------------------------------------------- host run
class _Steps(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in STEP_FIELDS]


def host_q(lib: ctypes.CDLL, si: Json, bc: Bytecode, lay: QLayout, aux: np.ndarray, const: np.ndarray,
           scalars: dict[str, np.ndarray], n_blocks: int = 512, scratch_elems: int | None = None,
           poison: int = 0xDEC0DEDDEC0DEDDE) -> np.ndarray:
    """Q (3, NExt) from the interpreter run on the CPU (same per-row code as the GPU kernel)."""
    n = lay.n_ext
    aux = np.ascontiguousarray(aux, dtype=np.uint64)
    const = np.ascontiguousarray(const, dtype=np.uint64)
    sc = {k: np.ascontiguousarray(v, dtype=np.uint64) for k, v in scalars.items()}
    st = _Steps()
    st.aux_trace = aux.ctypes.data
    st.pConstPolsExtendedTreeAddress = const.ctypes.data if const.size else None
    for k, v in sc.items():
        setattr(st, k, v.ctypes.data)
    per_block = lib.interp_scratch_per_block(n, bc.n_temp1, bc.n_temp3)
    if scratch_elems is None:
        scratch_elems = max(per_block * n_blocks, 1)
    scratch = np.full(max(scratch_elems, 1), poison, dtype=np.uint64)
    q = np.full(3 * n, poison, dtype=np.uint64)
    ops, args, nums = bc.ops_array(), bc.args_array(), bc.numbers_array()
    opn = openings_array(si)
    o1, o2, o3, oz = lay.offsets()
    rc = lib.interp_host_run(ctypes.addressof(st), ops.ctypes.data, args.ctypes.data, nums.ctypes.data,
                             bc.n_ops, bc.n_temp1, bc.n_temp3, q.ctypes.data, scratch.ctypes.data,
                             scratch_elems, n, n_blocks, o1, o2, o3, oz, si["nStages"], n_custom(si),
                             blowup(si), opn.ctypes.data, len(opn))
    if rc != 0:
        raise RuntimeError(f"interp_host_run returned {rc} ({INTERP_ERRORS.get(rc, 'kernel error bits')})")
    return q.reshape(3, n)


# ------------------------------------------------------------------------------- trace domain
@dataclass
class TraceLayout:
    """Where a trace-domain expression's inputs are, in elements (u64), as the prover lays out the
    non-extended sections (spec §2.3, §2.4): one ``aux`` holding ``cm1 | cm2 | cm3`` with ``n`` rows
    per column (ColMajor) after one column of ``n`` words that stands for what precedes them in the
    prover's aux_trace (so ``trace`` = ``aux + off_cm[1]`` is not ``aux_trace``); the const columns
    (``pConstPolsAddress``, ``n`` rows each) apart; the scalar buffers as :class:`QLayout`'s."""

    n: int
    cols: dict[int, int]
    off_cm: dict[int, int]
    aux_elems: int
    n_const: int
    scalar_sizes: dict[str, int]

    @classmethod
    def of(cls, si: Json, n: int) -> "TraceLayout":
        q = QLayout.of(si, n)
        off, pos = {}, n
        for s, c in q.cols.items():
            off[s] = pos
            pos += c * n
        return cls(n, q.cols, off, pos, q.n_const, q.scalar_sizes)

    def offsets(self) -> tuple[int, int, int]:
        """off_cm1, off_cm2, off_cm3 as exps_launch_expr takes them (mapOffsets[cmS, false])."""
        return self.off_cm.get(1, 0), self.off_cm.get(2, 0), self.off_cm.get(3, 0)

    def input_bytes(self) -> int:
        return 8 * (self.aux_elems + self.n_const * self.n + sum(self.scalar_sizes.values()))

    def domain(self, aux: np.ndarray, const: np.ndarray, sc: dict[str, np.ndarray]):
        """The oracle's view of these inputs (codegen.check.reference.DomainData, no Zi)."""
        from codegen.check import reference
        n = self.n
        return reference.DomainData(
            n, {s: aux[self.off_cm[s]: self.off_cm[s] + c * n].reshape(c, n) for s, c in self.cols.items()},
            const[: self.n_const * n].reshape(-1, n) if self.n_const else np.zeros((0, n), np.uint64),
            None, sc["publicInputs"], sc["challenges"], sc["airValues"], sc["airgroupValues"],
            sc["proofValues"], sc["evals"])


def dest_words(n: int, dest_dim: int, dest_expr: bool, stage_pos: int) -> int:
    """Elements of a destination buffer: ``n * destDim`` (expression buffer, row-major) or
    ``(stagePos + destDim)`` columns of ``n`` rows (stage section, ColMajor)."""
    return n * dest_dim if dest_expr else (stage_pos + dest_dim) * n


def dest_view(buf: np.ndarray, n: int, dest_dim: int, dest_expr: bool, stage_pos: int) -> np.ndarray:
    """The (destDim, n) words an expression store writes, from a flat destination buffer."""
    if dest_expr:
        return np.asarray(buf).reshape(n, dest_dim).T
    return np.asarray(buf).reshape(stage_pos + dest_dim, n)[stage_pos: stage_pos + dest_dim]


def host_expr(lib: ctypes.CDLL, si: Json, bc: Bytecode, lay: TraceLayout, aux: np.ndarray, const: np.ndarray,
              scalars: dict[str, np.ndarray], dest: np.ndarray, mode: int, dest_dim: int, dest_expr: bool,
              stage_pos: int = 0, scalar: int = 0, num1: bool = False, n_blocks: int = 512,
              poison: int = 0xDEC0DEDDEC0DEDDE) -> np.ndarray:
    """One trace-domain expression by the interpreter on the CPU, stored into a copy of ``dest``
    (flat, :func:`dest_words` long) as exps_launch_expr stores it; returns that copy."""
    n = lay.n
    aux = np.ascontiguousarray(aux, dtype=np.uint64)
    const = np.ascontiguousarray(const, dtype=np.uint64)
    sc = {k: np.ascontiguousarray(v, dtype=np.uint64) for k, v in scalars.items()}
    out = np.array(dest, dtype=np.uint64).reshape(-1).copy()
    if out.size != dest_words(n, dest_dim, dest_expr, stage_pos):
        raise ValueError(f"dest has {out.size} words, expected {dest_words(n, dest_dim, dest_expr, stage_pos)}")
    st = _Steps()
    st.aux_trace = aux.ctypes.data
    st.trace = aux.ctypes.data + 8 * lay.off_cm.get(1, 0)
    st.pConstPolsAddress = const.ctypes.data if const.size else None
    for k, v in sc.items():
        setattr(st, k, v.ctypes.data)
    scratch_elems = max(lib.interp_scratch_per_block(n, bc.n_temp1, bc.n_temp3) * n_blocks, 1)
    scratch = np.full(scratch_elems, poison, dtype=np.uint64)
    ops, args, nums = bc.ops_array(), bc.args_array(), bc.numbers_array()
    opn = openings_array(si)
    rc = lib.interp_host_expr_run(ctypes.addressof(st), ops.ctypes.data, args.ctypes.data, nums.ctypes.data,
                                  bc.n_ops, bc.n_temp1, bc.n_temp3, out.ctypes.data, scratch.ctypes.data,
                                  scratch_elems, n, n_blocks, *lay.offsets(), si["nStages"], n_custom(si),
                                  opn.ctypes.data, len(opn), n, mode, scalar, stage_pos, dest_dim,
                                  int(dest_expr), int(num1))
    if rc != 0:
        raise RuntimeError(f"interp_host_expr_run returned {rc} ({INTERP_ERRORS.get(rc, 'kernel error bits')})")
    return out
