#!/usr/bin/env python3
"""Trace-domain expression benchmark on one GPU: generated `exps_launch_expr` vs a bytecode interpreter.

    python3 bench/exprs.py --pk provingkey-sample --pk /path/to/pk --rows 22 --out $OUT

For every AIR of every key whose `.exps.so` is in place (`exps-codegen build PK --arch 90` first), for
every expression the `.so` covers (`exps_expr_covered`: hint and intermediate-column expressions the
prover evaluates over the N trace rows), and for every store mode / destination the prover uses it
with (below), plus a WRITE into an expression buffer of the expression's dim for every one:

* N = 2^rows trace rows of random raw words (uniform words, edge values 0 / p / p-1 / >= p / around
  2^32, small integers, 0/1 selectors; `bench/run.py`'s generator) laid out as the prover lays out the
  non-extended sections: one aux_trace `cm1 | cm2 | cm3` (ColMajor, N rows), `trace` = its cm1
  part, `pConstPolsAddress` with N rows per constant, the scalar buffers;
* generated: `exps_launch_expr(expId, P, dest, N, N, off_cm1..3, mode, scalar, stagePos, stageCols,
  destDim, destExpr)`; interpreter: `interp_expr_launch` of `bench/interp.cu` (the expression's
  bytecode, compiled like the `.bin` writer's, run over N rows like the prover's
  `computeExpressions_`, stored with the same store modes);
* both outputs compared word for word on all N rows (same starting destination; unwritten words
  and interpreter error bits checked), and both against the numpy oracle
  (`codegen.check.reference.eval_expression` + `store`) at 2^oracle-rows rows;
* timed with CUDA events: `--warmup` runs, then the median of `--reps` (generated before and after
  the interpreter).

Which launches the prover makes (spec §4.1-§4.3, fast path only):

| expression kind | launches of exps_launch_expr |
| --- | --- |
| imPol expression (cmPolsMap `imPol`, stage 2) | WRITE into its stage column (destExpr 0, destDim = its dim) |
| im_col numerator (tmp) | WRITE into the `reference` column, destDim = max(num, den dims) |
| im_col denominator, tmp numerator | MUL_INV into the `reference` column (after the numerator's WRITE) |
| im_col denominator, number numerator | WRITE_INV into the `reference` column, scalar = the number |
| gsum_col / gprod_col `expression` / numerator (tmp) | WRITE into the expression buffer (q scratch, destExpr 1) |
| gprod_col / gsum_col denominator (tmp), tmp numerator | MUL_INV into the expression buffer |
| any other covered expression | (none found in hintsInfo: only the generic WRITE is timed) |

A `cm` numerator, a number denominator other than 1, and `im_airval` (a destination of 1 row) go to the
interpreter in the prover: not timed. The prover's interpreter evaluates a (numerator, denominator)
pair in one kernel where the fast path makes two launches; here each launch is timed on its own.

Device copy bandwidth is measured once (`bench/run.py`'s test). floor of a launch = (distinct columns
the expression reads, each once + destDim words written per row + destDim read for MUL_INV) x 8 B x N /
bandwidth. Writes $OUT/exprs.json (everything) and $OUT/exprs.md (per-AIR table, per-launch-kind
table, command, device) and prints the table last. Exit status 1 if any output differs or an AIR
failed; `--budget-s` stops starting new expressions once spent (those are listed as not run).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shlex
import statistics
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bytecode as BC  # noqa: E402
from bench import interp_lib as IL  # noqa: E402
from bench import run as R  # noqa: E402

WRITE, MUL_INV, WRITE_INV = 0, 1, 2
MODE_NAMES = {WRITE: "WRITE", MUL_INV: "MUL_INV", WRITE_INV: "WRITE_INV"}
POISON = R.POISON
N_BLOCKS = R.N_BLOCKS

Json = dict[str, Any]


# ===================================================================== pure helpers (CPU-testable)
@dataclass
class Case:
    """One exps_launch_expr call shape of one expression."""

    mode: int
    dest_expr: bool
    dest_dim: int
    stage_pos: int = 0
    scalar: int = 0
    uses: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, bool, int]:
        return self.mode, self.dest_expr, self.dest_dim

    @property
    def label(self) -> str:
        return f"{MODE_NAMES[self.mode]} {'expr' if self.dest_expr else 'col'} dim{self.dest_dim}"

    def words_per_row(self) -> int:
        """Destination words moved per row: written, and read back by MUL_INV."""
        return self.dest_dim * (2 if self.mode == MUL_INV else 1)


def _field_values(hint: Json) -> dict[str, list[Json]]:
    return {f["name"]: f.get("values", []) for f in hint.get("fields", [])}


def _single(values: list[Json] | None) -> Json | None:
    return values[0] if values and len(values) == 1 else None


#: (numerator, denominator) fields of a hint the prover evaluates as numerator * denominator^-1
PAIRS = (("numerator", "denominator"), ("numerator_air", "denominator_air"),
         ("numerator_direct", "denominator_direct"))
#: hints whose result goes to the expression buffer (q scratch, destExpr 1) and is prefix-scanned
EXPR_BUFFER_HINTS = ("gsum_col", "gprod_col")


def prover_cases(si: Json, ei: Json, vdims: dict[int, int]) -> dict[int, list[Case]]:
    """expId -> the exps_launch_expr calls the prover's fast path makes with it (spec §4.1-§4.3; the
    table in this module's docstring), deduplicated by (mode, destExpr, destDim). ``vdims``: the bin
    destDim of every expression with code (the dim ``addParams`` gives a tmp param)."""
    out: dict[int, dict[tuple, Case]] = {}

    def add(exp_id: int, c: Case, use: str) -> None:
        cases = out.setdefault(exp_id, {})
        if c.key not in cases:
            cases[c.key] = c
        if use not in cases[c.key].uses:
            cases[c.key].uses.append(use)

    cm = si.get("cmPolsMap", [])
    for i, p in enumerate(cm):
        if p.get("imPol") and "expId" in p and p["expId"] in vdims:
            add(p["expId"], Case(WRITE, False, p["dim"], p["stagePos"]), f"imPol {p.get('name', i)}")

    for h in ei.get("hintsInfo", []):
        name = h.get("name", "")
        f = _field_values(h)
        if name == "im_airval":
            continue                      # destination: an airvalue, 1 row
        dest_expr = name in EXPR_BUFFER_HINTS
        stage_pos = 0
        if not dest_expr:
            ref = _single(f.get("reference"))
            if ref is None or ref.get("op") != "cm" or not 0 <= ref.get("id", -1) < len(cm):
                continue                  # no column destination we can place
            stage_pos = cm[ref["id"]]["stagePos"]

        def dim_of(v: Json) -> int:
            return vdims.get(v["id"], v.get("dim", 1)) if v.get("op") == "tmp" else v.get("dim", 1)

        one = _single(f.get("expression"))
        if one is not None and one.get("op") == "tmp" and one["id"] in vdims:
            add(one["id"], Case(WRITE, dest_expr, vdims[one["id"]], stage_pos), f"{name} expression")
        for num_name, den_name in PAIRS:
            num, den = _single(f.get(num_name)), _single(f.get(den_name))
            if num is None or den is None:
                continue
            nop, dop = num.get("op"), den.get("op")
            if nop == "tmp" and dop == "number" and int(den.get("value", 0)) == 1:
                # the number 1 is not added as a param: [numerator] alone -> WRITE
                add(num["id"], Case(WRITE, dest_expr, dim_of(num), stage_pos), f"{name} {num_name}")
            elif nop == "tmp" and dop == "tmp" and num["id"] in vdims and den["id"] in vdims:
                ddim = max(dim_of(num), dim_of(den))
                add(num["id"], Case(WRITE, dest_expr, ddim, stage_pos), f"{name} {num_name}")
                add(den["id"], Case(MUL_INV, dest_expr, ddim, stage_pos), f"{name} {den_name}")
            elif nop == "number" and dop == "tmp" and den["id"] in vdims:
                c = Case(WRITE_INV, dest_expr, dim_of(den), stage_pos, int(num.get("value", 0)) % (1 << 64))
                add(den["id"], c, f"{name} {den_name} (number numerator)")
    return {e: list(cs.values()) for e, cs in out.items()}


def cases_of(exp_id: int, vdim: int, prover: dict[int, list[Case]]) -> list[Case]:
    """The generic WRITE into an expression buffer of the value's dim, then the prover's calls."""
    generic = Case(WRITE, True, vdim, uses=["generic"])
    out = [generic]
    for c in prover.get(exp_id, []):
        if c.key == generic.key:
            generic.uses += c.uses
        else:
            out.append(Case(c.mode, c.dest_expr, c.dest_dim, c.stage_pos, c.scalar, list(c.uses)))
    return out


def floor_ms(n_columns: int, words_per_row: int, n: int, bandwidth_gbs: float) -> float:
    """Each distinct input column read once + the destination words moved, at copy bandwidth."""
    return (n_columns + words_per_row) * 8 * n / (bandwidth_gbs * 1e9) * 1e3


TABLE_HEAD = ["AIR", "N", "exprs timed", "launches", "generated ms (sum)", "interpreter ms (sum)",
              "floor ms (sum)", "% of floor", "speed-up", "bit-identical"]


def summarize(r: Json) -> None:
    """Per-AIR sums over the launches that were timed (in place)."""
    timed = [c for c in r.get("cases", []) if c.get("gen_ms") is not None and c.get("interp_ms") is not None]
    r["launches_timed"] = len(timed)
    r["exprs_timed"] = len({c["exp_id"] for c in timed})
    if not timed:
        return
    g = sum(c["gen_ms"] for c in timed)
    i = sum(c["interp_ms"] for c in timed)
    f = sum(c["floor_ms"] for c in timed)
    r.update({"gen_ms": g, "interp_ms": i, "floor_ms": f, "floor_over_gen": f / g if g else None,
              "speedup": i / g if g else None})
    pv = [c for c in timed if c["uses"] != ["generic"]]
    if pv:
        pg = sum(c["gen_ms"] for c in pv)
        r.update({"prover_launches": len(pv), "prover_gen_ms": pg,
                  "prover_interp_ms": sum(c["interp_ms"] for c in pv),
                  "prover_floor_ms": sum(c["floor_ms"] for c in pv)})


def table_rows(results: list[Json]) -> list[list[str]]:
    rows = []
    for r in results:
        if r.get("gen_ms") is None:
            status = r.get("status", "?")
            if status == "ok" and r.get("note"):
                status = r["note"]
            rows.append([r["air"], f"2^{r['rows']}" if "rows" in r else "-",
                         f"{r.get('exprs_timed', 0)}/{r.get('exprs_covered', '?')}", str(r.get("launches_timed", 0))]
                        + ["-"] * 5 + [status])
            continue
        rows.append([r["air"], f"2^{r['rows']}", f"{r['exprs_timed']}/{r['exprs_covered']}",
                     str(r["launches_timed"]), R.fmt(r["gen_ms"]), R.fmt(r["interp_ms"]), R.fmt(r["floor_ms"]),
                     R.pct(r["floor_over_gen"]), f"{r['speedup']:.2f}x",
                     "yes" if r.get("status") == "ok" else r.get("status", "?")])
    return rows


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def plain_table(head: list[str], rows: list[list[str]]) -> str:
    rows = [head] + rows
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)) for r in rows)


KIND_HEAD = ["launch", "launches", "generated ms (sum)", "interpreter ms (sum)", "floor ms (sum)",
             "% of floor", "speed-up"]


def kind_rows(results: list[Json]) -> list[list[str]]:
    """Per launch kind (mode, destination, destDim) over every AIR."""
    agg: dict[str, list[float]] = {}
    for r in results:
        for c in r.get("cases", []):
            if c.get("gen_ms") is None or c.get("interp_ms") is None:
                continue
            a = agg.setdefault(c["label"], [0, 0.0, 0.0, 0.0])
            a[0] += 1
            a[1] += c["gen_ms"]
            a[2] += c["interp_ms"]
            a[3] += c["floor_ms"]
    return [[k, str(n), R.fmt(g), R.fmt(i), R.fmt(f), R.pct(f / g if g else None), f"{i / g:.2f}x" if g else "-"]
            for k, (n, g, i, f) in sorted(agg.items())]


def median_floor(results: list[Json]) -> float | None:
    xs = [r["floor_over_gen"] for r in results if r.get("floor_over_gen") is not None]
    return float(statistics.median(xs)) if xs else None


def markdown_report(meta: Json, results: list[Json]) -> str:
    ok = [r for r in results if r.get("gen_ms") is not None]
    mf = median_floor(results)
    sp = [r["speedup"] for r in ok if r.get("speedup")]
    not_run = sum(len(r.get("not_run", [])) for r in results)
    lines = [
        f"### Trace-domain expressions (exps_launch_expr) vs bytecode interpreter, {meta['device']} "
        f"(N = 2^{meta['rows']})", "",
        f"Command: `{meta['command']}`  ",
        f"Device: {meta['device']}, driver {meta['driver']}, CUDA runtime {meta['cuda_runtime']}, "
        f"nvcc {meta['nvcc']}, CuPy {meta['cupy']}; {meta['date']}.  ",
        f"Copy bandwidth (D2D, bytes read + written): {meta['bandwidth_gbs']:,.0f} GB/s. CUDA events, median "
        f"of {meta['reps']} runs after {meta['warmup']} warm-ups.", "",
        markdown_table(TABLE_HEAD, table_rows(results)), "",
        f"{len(ok)} AIRs timed, {sum(r['launches_timed'] for r in ok)} launches of "
        f"{sum(r['exprs_timed'] for r in ok)} expressions; median % of floor over AIRs: {R.pct(mf)}; "
        f"speed-up over the interpreter: geometric mean {R.geomean(sp):.2f}x."
        + (f" {not_run} launches not run (time budget)." if not_run else ""), "",
        "Sums per AIR over every launch timed: for each covered expression a WRITE into an expression "
        "buffer of its own dim, and each store mode / destination the prover's fast path uses it with "
        "(imPol and im_col: stage columns; gsum/gprod: the expression buffer; MUL_INV / WRITE_INV for "
        "denominators). exprs timed = timed / covered (`exps_expr_covered`). floor = (distinct columns "
        "read once + destination words written, and read by MUL_INV) x 8 B x N / copy bandwidth; % of "
        "floor = floor / generated; speed-up = interpreter / generated; interpreter = "
        f"`bench/interp.cu`'s trace-domain entry ({meta['interp_regs']} registers), one expression per "
        "launch. bit-identical = generated and interpreter equal word for word on all N rows, and both "
        "equal to the numpy oracle at "
        f"{'2^' + str(meta['oracle_rows']) if meta['oracle_rows'] else 'no'} rows.", "",
        "#### Per launch kind (all AIRs)", "",
        markdown_table(KIND_HEAD, kind_rows(results)),
    ]
    return "\n".join(lines) + "\n"


# ========================================================================================== GPU
class ExprGenLib:
    """The trace-domain entry points of a generated `.exps.so`."""

    def __init__(self, path: Path):
        self.lib = ctypes.CDLL(str(path))
        ull, vp = ctypes.c_ulonglong, ctypes.c_void_p
        self.lib.exps_expr_covered.argtypes = [ull]
        self.lib.exps_expr_covered.restype = ctypes.c_int
        self.lib.exps_launch_expr.argtypes = [ull, vp, vp, ull, ull, ull, ull, ull, ull, ull, ull, ull, ull,
                                              ctypes.c_uint, vp]
        self.lib.exps_launch_expr.restype = ctypes.c_int

    def covered(self, exp_id: int) -> bool:
        return bool(self.lib.exps_expr_covered(exp_id))

    def launch(self, exp_id: int, steps: int, dest: int, n: int, offs: tuple[int, int, int], c: Case) -> None:
        stage_cols = c.dest_dim if c.dest_expr else c.stage_pos + c.dest_dim
        rc = self.lib.exps_launch_expr(exp_id, steps, dest, n, n, *offs, c.mode, c.scalar, c.stage_pos,
                                       stage_cols, c.dest_dim, int(c.dest_expr), None)
        if rc != 1:
            raise RuntimeError(f"exps_launch_expr({exp_id}, {c.label}) returned {rc}")


class TraceInputs:
    """One set of trace-domain inputs on the device and its StepsParams."""

    def __init__(self, g: R.Gpu, lay: IL.TraceLayout, seed: int):
        cp = self.cp = g.cp
        self.lay = lay
        self.aux = cp.empty(max(lay.aux_elems, 1), dtype=cp.uint64)
        self.const = cp.empty(max(lay.n_const * lay.n, 1), dtype=cp.uint64)
        self.scalars = {k: cp.empty(v, dtype=cp.uint64) for k, v in lay.scalar_sizes.items()}
        g.fill(self.aux, seed)
        g.fill(self.const, seed + 1)
        for i, (k, v) in enumerate(sorted(self.scalars.items())):
            g.fill(v, seed + 2 + i)
        if os.environ.get("BENCH_INPUTS") == "uniform":
            # as the prover draws them: challenges, evals and the other scalars uniform field
            # elements (the mix can make a challenge a base-field element, (c0, 0, 0): every value
            # built on it then has two zero components, i.e. the value path's fallback on every
            # row); the columns keep the mix (witness columns hold small integers and selectors)
            rs = cp.random.RandomState(seed + 77)
            for v in self.scalars.values():
                if v.size:
                    v[:] = R.uniform_field(cp, rs, v.size)
        aux = int(self.aux.data.ptr)
        fields = {"aux_trace": aux, "trace": aux + 8 * lay.off_cm.get(1, 0),
                  "pConstPolsAddress": int(self.const.data.ptr)}
        fields.update({k: int(v.data.ptr) for k, v in self.scalars.items()})
        self.steps_arr = cp.asarray(np.array([fields.get(f, 0) for f in IL.STEP_FIELDS], dtype=np.uint64))
        self.steps = int(self.steps_arr.data.ptr)

    def host(self):
        cp = self.cp
        return (cp.asnumpy(self.aux), cp.asnumpy(self.const),
                {k: cp.asnumpy(v) for k, v in self.scalars.items()})


class ExprInterp:
    """libinterp.so's trace-domain entry bound to one AIR's bytecodes on the device."""

    def __init__(self, g: R.Gpu, lib: ctypes.CDLL, si: Json, numbers: list[int]):
        cp = g.cp
        self.g, self.lib, self.si = g, lib, si
        self.d_nums = cp.asarray(np.array(numbers or [0], dtype=np.uint64))
        self.openings = IL.openings_array(si)
        self.d_err = cp.zeros(1, dtype=cp.int32)
        self._code: dict[int, tuple] = {}

    def scratch_elems(self, n: int, bc: BC.Bytecode) -> int:
        return int(self.lib.interp_scratch_per_block(n, bc.n_temp1, bc.n_temp3)) * N_BLOCKS

    def launch(self, bc: BC.Bytecode, steps: int, dest: int, scratch, n: int, offs: tuple[int, int, int],
               c: Case, num1: bool) -> None:
        if bc.exp_id not in self._code:
            cp = self.g.cp
            self._code[bc.exp_id] = (cp.asarray(bc.ops_array()), cp.asarray(bc.args_array()))
        d_ops, d_args = self._code[bc.exp_id]
        rc = self.lib.interp_expr_launch(
            steps, int(d_ops.data.ptr), int(d_args.data.ptr), int(self.d_nums.data.ptr), bc.n_ops, bc.n_temp1,
            bc.n_temp3, dest, int(scratch.data.ptr), int(scratch.size), n, N_BLOCKS, *offs, self.si["nStages"],
            IL.n_custom(self.si), self.openings.ctypes.data, len(self.openings), n, c.mode, c.scalar,
            c.stage_pos, c.dest_dim, int(c.dest_expr), int(num1), 0, int(self.d_err.data.ptr), None)
        if rc != 0:
            raise RuntimeError(f"interp_expr_launch returned {rc} ({IL.INTERP_ERRORS.get(rc, 'a cudaError_t')})")

    def errors(self) -> int:
        return int(self.d_err.get()[0])


def _first_diff(got, want, n: int) -> str:
    got, want = np.asarray(got), np.asarray(want)
    bad = np.argwhere(got != want)
    i = tuple(int(x) for x in bad[0])
    return f"{len(bad)} words differ, first at {i}: {int(got[i]):#x} != {int(want[i]):#x}"


@dataclass
class Expr:
    exp_id: int
    bc: BC.Bytecode
    json: Json
    vdim: int
    num1: bool
    num_dim: int
    cols: int
    cases: list[Case]


def _dest_init(g: R.Gpu, c: Case, n: int, seed: int):
    """A destination buffer: poison for WRITE / WRITE_INV (they must not read it, and must write every
    word of their columns), random raw words for MUL_INV (what the numerator's WRITE left there)."""
    cp = g.cp
    size = max(IL.dest_words(n, c.dest_dim, c.dest_expr, c.stage_pos), 1)
    d = cp.full(size, np.uint64(POISON), dtype=cp.uint64)
    if c.mode == MUL_INV:
        g.fill(d if c.dest_expr else d[c.stage_pos * n:], seed)
    return d


def _view(g: R.Gpu, buf, n: int, c: Case):
    """The written (destDim, n) words of a device destination, as a device array."""
    if c.dest_expr:
        return buf.reshape(n, c.dest_dim).T
    return buf.reshape(c.stage_pos + c.dest_dim, n)[c.stage_pos:]


def oracle_check(g: R.Gpu, si: Json, ei: Json, gen: ExprGenLib, itp: ExprInterp, exprs: list[Expr], rows: int,
                 seed: int) -> dict[int, list[str]]:
    """Generated and interpreter vs the numpy oracle at 2^rows rows, every case of every expression."""
    from codegen.check import reference
    cp = g.cp
    n = 1 << rows
    lay = IL.TraceLayout.of(si, n)
    ins = TraceInputs(g, lay, seed)
    aux, const, sc = ins.host()
    dd = lay.domain(aux, const, sc)
    errs: dict[int, list[str]] = {}
    for k, x in enumerate(exprs):
        try:
            v = reference.eval_expression(si, x.json, dd, False)
        except reference.OracleRefusal as e:    # covered, so the oracle must evaluate it (as hostcheck)
            errs.setdefault(x.exp_id, []).append(f"expr {x.exp_id}: covered, but the oracle refuses it: {e}")
            continue
        scr = cp.empty(max(itp.scratch_elems(n, x.bc), 1), dtype=cp.uint64)
        for j, c in enumerate(x.cases):
            base = _dest_init(g, c, n, seed + 1000 * k + j)
            before = np.array(cp.asnumpy(base))
            want = reference.store(c.mode, v, IL.dest_view(before, n, c.dest_dim, c.dest_expr, c.stage_pos),
                                   c.scalar, x.num_dim)
            for name, run in (("generated", lambda d: gen.launch(x.exp_id, ins.steps, d, n, lay.offsets(), c)),
                              ("interpreter", lambda d: itp.launch(x.bc, ins.steps, d, scr, n, lay.offsets(), c,
                                                                   x.num1))):
                d = cp.asarray(before)
                run(int(d.data.ptr))
                g.sync()
                full = np.array(cp.asnumpy(d))
                got = IL.dest_view(full, n, c.dest_dim, c.dest_expr, c.stage_pos)
                if not np.array_equal(got, want):
                    errs.setdefault(x.exp_id, []).append(
                        f"expr {x.exp_id} {c.label} {name} vs oracle at 2^{rows}: {_first_diff(got, want, n)}")
                if not c.dest_expr and c.stage_pos and not np.array_equal(full[: c.stage_pos * n],
                                                                          before[: c.stage_pos * n]):
                    errs.setdefault(x.exp_id, []).append(f"expr {x.exp_id} {c.label} {name}: wrote outside its columns")
    if itp.errors():
        errs.setdefault(-1, []).append(f"interpreter error bits {itp.errors()}")
    return errs


def load_exprs(si: Json, ei: Json, gen: ExprGenLib, res: Json) -> list[Expr]:
    """The covered expressions with their bytecode, dims and cases; refusals noted in res."""
    from codegen.check import reference
    bcs, numbers, refused = BC.compile_bin(si, ei, copy="mul1")
    res["numbers"] = len(numbers)
    vdims = {e["expId"]: int(e["code"][-1]["dest"]["dim"]) for e in ei["expressionsCode"] if e.get("code")}
    prover = prover_cases(si, ei, vdims)
    ids = [e["expId"] for e in ei["expressionsCode"] if e["expId"] != si.get("cExpId")]
    covered = [e for e in ids if gen.covered(e)]
    res["exprs_covered"] = len(covered)
    res["covered_ids"] = covered
    bin_exprs = None
    bin_path = Path(res["starkinfo"][: -len(".starkinfo.json")] + ".bin")
    if bin_path.is_file():
        from codegen.check.binfile import read_bin
        bin_exprs = read_bin(bin_path).expressions
        res["bin_match"] = True
    out, skipped = [], {}
    for e in covered:
        if e in refused:
            skipped[e] = f"no bytecode: {refused[e]}"
            continue
        bc = bcs[e]
        try:
            BC.check_runnable(si, bc)
            if any(t == si["nStages"] + 2 for k in range(bc.n_ops) for t in (bc.op(k)[1][2], bc.op(k)[1][5])):
                raise BC.BytecodeError("reads Zi (extended domain only)")
            num_dim = reference.mul_inv_numerator_dim(ei, e)
        except (BC.BytecodeError, reference.OracleRefusal) as err:
            skipped[e] = str(err)
            continue
        if bin_exprs is not None:
            be = bin_exprs.get(e)
            if be is None or tuple(bc.ops) != be.op_kinds or tuple(bc.args) != be.args:
                res["bin_match"] = False
        expr = BC.find_expression(ei, e)
        out.append(Expr(e, bc, expr, bc.out_dim, bc.out_dim == 3 and num_dim == 1, num_dim,
                        len(BC.distinct_columns(si, bc)), cases_of(e, bc.out_dim, prover)))
    res["skipped"] = {str(k): v for k, v in skipped.items()}
    res["_numbers"] = numbers
    return out


def bench_air(g: R.Gpu, ilib: ctypes.CDLL, air: R.Air, a, bandwidth: float, deadline: float) -> Json:
    cp = g.cp
    si = json.loads(air.starkinfo.read_text())
    ei = json.loads(air.expressions.read_text())
    res: Json = {"air": air.name, "rel": air.rel, "pk": str(air.pk), "key": air.key,
                 "starkinfo": str(air.starkinfo), "cases": [], "errors": [], "not_run": []}
    gen = ExprGenLib(R.HOOKS.gen_lib(air))
    exprs = load_exprs(si, ei, gen, res)
    numbers = res.pop("_numbers")
    if res["skipped"]:
        res["errors"] += [f"covered expression {k} not benchmarked: {v}" for k, v in res["skipped"].items()]
    if not exprs:
        res["status"] = "ok" if not res["errors"] else "ERROR"
        res["note"] = "no covered trace-domain expression"
        summarize(res)
        return res
    itp = ExprInterp(g, ilib, si, numbers)

    # ---- oracle check at a small size
    oerr: dict[int, list[str]] = {}
    if a.oracle_rows:
        oerr = oracle_check(g, si, ei, gen, itp, exprs, a.oracle_rows, a.seed + 7)
        for v in oerr.values():
            res["errors"] += v

    # ---- full size
    max_dest = max(IL.dest_words(1, c.dest_dim, c.dest_expr, c.stage_pos) for x in exprs for c in x.cases)
    max_scr = max(int(ilib.interp_scratch_per_block(1 << a.rows, x.bc.n_temp1, x.bc.n_temp3)) for x in exprs)

    def need(lay: IL.TraceLayout) -> int:
        return lay.input_bytes() + 8 * (2 * max_dest * lay.n + max_scr * N_BLOCKS)
    rows = R.rows_that_fit(g, lambda n: IL.TraceLayout.of(si, n), a.rows, need, min_rows=min(a.rows, 12))
    n = 1 << rows
    lay = IL.TraceLayout.of(si, n)
    seed = a.seed * 1_000_003 + zlib.crc32(air.key.encode())
    ins = TraceInputs(g, lay, seed)
    offs = lay.offsets()
    res.update({"rows": rows, "n": n, "input_bytes": lay.input_bytes()})
    for k, x in enumerate(exprs):
        scr = cp.empty(max(itp.scratch_elems(n, x.bc), 1), dtype=cp.uint64)
        for j, c in enumerate(x.cases):
            rec: Json = {"exp_id": x.exp_id, "label": c.label, "mode": MODE_NAMES[c.mode],
                         "dest": "expr" if c.dest_expr else "col", "dest_dim": c.dest_dim, "vdim": x.vdim,
                         "stage_pos": c.stage_pos, "scalar": c.scalar, "uses": c.uses, "num1": x.num1,
                         "ops": x.bc.n_ops, "n_temp1": x.bc.n_temp1, "n_temp3": x.bc.n_temp3,
                         "columns_read": x.cols, "muls_per_row": x.bc.muls_per_row(),
                         "oracle_ok": (not oerr.get(x.exp_id)) if a.oracle_rows else None}
            if time.monotonic() > deadline:
                res["not_run"].append(f"{x.exp_id} {c.label}")
                continue
            d_gen = _dest_init(g, c, n, seed + 7919 * k + j)
            d_int = d_gen.copy()

            def run_gen(_i: int, d=d_gen) -> None:
                gen.launch(x.exp_id, ins.steps, int(d.data.ptr), n, offs, c)

            def run_int(_i: int, d=d_int) -> None:
                itp.launch(x.bc, ins.steps, int(d.data.ptr), scr, n, offs, c, x.num1)

            run_gen(0)
            run_int(0)
            g.sync()
            errs = []
            if not bool(cp.array_equal(d_gen, d_int)):
                diff = cp.nonzero(d_gen != d_int)[0]
                i = int(diff[0])
                errs.append(f"expr {x.exp_id} {c.label}: generated != interpreter on {int(diff.size)} of "
                            f"{d_gen.size} words, first at word {i}: {int(d_gen[i]):#x} vs {int(d_int[i]):#x}")
            if c.mode != MUL_INV:
                left = int(cp.count_nonzero(_view(g, d_gen, n, c) == np.uint64(POISON)))
                if left:
                    errs.append(f"expr {x.exp_id} {c.label}: {left} destination words left unwritten")
            if itp.errors():
                errs.append(f"expr {x.exp_id} {c.label}: interpreter error bits {itp.errors()}")
            t_a = g.time(run_gen, a.warmup, a.reps)
            t_i = g.time(run_int, a.warmup, a.reps)
            t_b = g.time(run_gen, a.warmup, a.reps)
            gm = R.median_ms(t_a + t_b)
            ma, mb = R.median_ms(t_a), R.median_ms(t_b)
            rec.update({"gen_ms": gm, "gen_ms_runs": t_a + t_b, "interp_ms": R.median_ms(t_i),
                        "interp_ms_runs": t_i, "gen_repeat_spread": abs(ma - mb) / max(min(ma, mb), 1e-9),
                        "floor_ms": floor_ms(x.cols, c.words_per_row(), n, bandwidth),
                        "identical": not errs and rec["oracle_ok"] is not False, "errors": errs})
            res["errors"] += errs
            res["cases"].append(rec)
            del d_gen, d_int
    summarize(res)
    if res["errors"]:
        res["status"] = "MISMATCH" if any("!=" in e or "vs oracle" in e or "unwritten" in e or "outside" in e
                                          for e in res["errors"]) else "ERROR"
    else:
        res["status"] = "ok" if not res["not_run"] else "partial (time budget)"
    if res.get("bin_match") is False:
        res["errors"].append("bytecode differs from the AIR's .bin")
        res["status"] = "ERROR"
    return res


# ======================================================================================= main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    R.add_common_args(ap, "N trace rows", "launch", "start no new launch")
    ap.add_argument("--arch", default="90", help="GPU arch of libinterp.so (default 90)")
    a = ap.parse_args(argv)
    if a.oracle_rows and not 4 <= a.oracle_rows <= 16:
        ap.error("--oracle-rows must be 0 or in [4, 16]")
    R.check_common_args(ap, a)
    return a


def main(argv: list[str] | None = None) -> int:
    cwd = os.getcwd()
    try:
        return _main(argv)
    finally:
        os.chdir(cwd)


def _main(argv: list[str] | None) -> int:
    a = parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + a.budget_s
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(REPO)
    command = "python3 bench/exprs.py " + shlex.join(sys.argv[1:] if argv is None else argv)

    so, build_text = R.HOOKS.interp_lib(a.arch)
    interp_regs = IL.ptxas_registers(build_text, "interp_expr_kernel")
    print(f"libinterp.so: {so} ({interp_regs} registers in interp_expr_kernel per ptxas)", flush=True)
    g = R.Gpu()
    ilib = R.HOOKS.load_interp(so)
    meta: Json = {
        "command": command, "device": g.name, "compute_capability": g.cc, "driver": g.driver(),
        "cuda_runtime": g.runtime(), "cupy": g.cp.__version__, "nvcc": R.nvcc_version(),
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "rows": a.rows, "reps": a.reps, "warmup": a.warmup, "oracle_rows": a.oracle_rows,
        "interp_regs": interp_regs, "interp_blocks": N_BLOCKS, "budget_s": a.budget_s,
    }
    print(f"device: {g.name} (cc {g.cc}), driver {meta['driver']}, CUDA runtime {meta['cuda_runtime']}, "
          f"CuPy {meta['cupy']}", flush=True)
    bw = g.copy_bandwidth(min(a.bandwidth_mib << 20, g.free_bytes() // 4))
    meta["bandwidth"] = bw
    meta["bandwidth_gbs"] = bw["gbs"]
    print(f"copy bandwidth: memcpy {bw['memcpy_gbs']:,.0f} GB/s, kernel {bw['kernel_gbs']:,.0f} GB/s", flush=True)

    results: list[Json] = []
    notes: list[str] = []
    airs: list[R.Air] = []
    for pk in a.pk:
        found, nts = R.find_airs(pk)
        notes += nts
        airs += [x for x in found if not a.air or any(s in f"{pk}/{x.rel}" for s in a.air)]
    if not airs:
        print("no AIR with a placed .exps.so: run `exps-codegen build PK --arch 90` first", file=sys.stderr)
    fatal = None
    for i, air in enumerate(airs):
        if fatal or time.monotonic() > deadline:
            results.append({"air": air.name, "rel": air.rel, "cases": [], "not_run": ["all"], "status":
                            "not run (" + (fatal or f"time budget {a.budget_s:.0f} s spent") + ")"})
            continue
        t0 = time.monotonic()
        try:
            r = bench_air(g, ilib, air, a, bw["gbs"], deadline)
        except Exception as e:  # noqa: BLE001 - report and go on (unless the context is gone)
            r = {"air": air.name, "rel": air.rel, "cases": [], "status": f"error: {type(e).__name__}: {e}"[:300],
                 "traceback": traceback.format_exc()}
            try:
                g.sync()
            except Exception as e2:  # noqa: BLE001
                fatal = f"CUDA context lost in {air.name}: {e2}"[:200]
        results.append(r)
        if r.get("gen_ms") is not None:
            msg = (f"{r['exprs_timed']}/{r['exprs_covered']} exprs, {r['launches_timed']} launches: gen "
                   f"{r['gen_ms']:.3f} ms, interp {r['interp_ms']:.3f} ms ({r['speedup']:.2f}x), floor "
                   f"{R.pct(r['floor_over_gen'])}, N 2^{r['rows']}, {r['status']}")
        else:
            msg = r.get("status", "?") + (f" ({r['note']})" if r.get("note") else "")
        if r.get("errors"):
            msg += "; " + "; ".join(r["errors"][:3])
        print(f"[{i + 1}/{len(airs)}] {air.name}: {msg} ({time.monotonic() - t0:.1f}s)", flush=True)

    meta["notes"] = notes
    meta["elapsed_s"] = time.monotonic() - t_start
    meta["median_floor_over_gen"] = median_floor(results)
    (out / "exprs.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str) + "\n")
    md = markdown_report(meta, results)
    (out / "exprs.md").write_text(md)
    for nt in notes:
        print("note:", nt)
    bad = [r for r in results if r.get("status") not in ("ok", "partial (time budget)")
           and not str(r.get("status", "")).startswith("not run (time budget")]
    for r in bad:
        print(f"FAILED {r['air']}: {r.get('status')} {'; '.join(r.get('errors', [])[:10])}")
        if r.get("traceback"):
            print(r["traceback"])
    skipped = sum(len(r.get("not_run", [])) for r in results)
    if skipped:
        print(f"time budget: {skipped} launches / AIRs not run (raise --budget-s or filter with --air)")
    print(f"\n{md.splitlines()[0]}\n{command}\n{g.name}, driver {meta['driver']}, copy {bw['gbs']:,.0f} GB/s, "
          f"{meta['elapsed_s']:.0f} s, median % of floor {R.pct(meta['median_floor_over_gen'])}\n")
    print(plain_table(TABLE_HEAD, table_rows(results)))
    print()
    print(plain_table(KIND_HEAD, kind_rows(results)))
    return 1 if bad or not results else 0


if __name__ == "__main__":
    sys.exit(main())
