"""IR + plan -> `{file name: text}` through `templates/` (Jinja2, StrictUndefined).

Semantics live in ir.py; what the text needs beyond the IR (where a kernel reads: its exps_offs
entries; what a Q chunk runs on the value path; which literals are words) is decided in
render_model.py before any text. This module only maps those to C text with two tables (`OP_C`
for ops by arith and shape, `_leaf_c` for loads by kind), each line in one pass. Only validated
integers are formatted into C. Output is deterministic: the same IR gives byte-identical
translation units.
"""
from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import jinja2

from codegen import EMITTER_VERSION
from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.model import open_regular
from codegen.coverage import ExprKernel
from codegen.passes import PassStats, optimize
from codegen.plan import Plan, plan
from codegen.program import exact_program
from codegen.remat import remat
from codegen.render_model import (ACC_USE, Base, Offsets, check_int, chunk_forms, literal_words, single_users,
                                  uses_value_path)
from codegen.resources import TEMPLATES

COMMON_HEADER = "gen_common.cuh"
#: the launch table's types (every `<key>_abi.cpp` and the launcher include it)
ABI_HEADER = "exps_abi.h"
#: the generic launcher: the C ABI of every `.so` over its kernel's launch table, compiled once
RUNTIME = "exps_runtime.cpp"
#: files of templates/ every kernel's sources use as they are (copied next to them)
COMMON_FILES = (COMMON_HEADER, ABI_HEADER, RUNTIME)
#: TUs hold about this many ops, so nvcc runs in parallel on large kernels
TU_OPS = 4000
#: a chunked Q's chunk kernels go in TUs of about this many ops, each a TU of its own, and its last
#: chunk (the one that holds the exact program, made of every literal of Q: codegen/program.py)
#: alone: an edit of one constant recompiles the TU of the chunk that reads it and the last one,
#: not a third of Q; each more TU costs TU_FIXED_OPS (docs/BENCHMARKS.md "Build cost")
Q_TU_OPS = 1024
#: what one trace-domain expression weighs in a TU besides its ops: its store modes (both inverses,
#: inlined in its kernel) cost ptxas about as much as this many Q ops
STORE_OPS = 100
#: what one more nvcc run costs, in Q ops compiled: ~0.25 s CPU for a TU of no work (the
#: preprocessing of gen_common.cuh and cuda_runtime.h, cicc's start) vs ~7 ms per Q op
#: (`bench/nvcc_log.sh` and `bench/nvcc_by_tu.py` on a build: docs/BENCHMARKS.md "Build cost")
TU_FIXED_OPS = 40
#: the generic inverse kernel's device TU (`generic_inverse_tu`): a part that `pack` never joins with
#: another, its text the same in every kernel that has it, and its name too (no key), so that a
#: compiler launcher, whose cache keys the command line (`src/<tu>`), also finds it compiled by any
#: other kernel of any machine
XINV_TU = "exps_xinv.cu"

#: op (arith, shape) -> (its C function, its operands in the order the function takes them: "ab",
#: or "ba" for a swapped sub; a copy is its operand)
OP_C = {
    ("add", "11"): ("gl_add", "ab"),
    ("sub", "11"): ("gl_sub", "ab"),
    ("mul", "11"): ("gl_mul", "ab"),
    ("sub_swap", "11"): ("gl_sub", "ba"),
    ("add", "31"): ("gl3_add31", "ab"),
    ("sub", "31"): ("gl3_sub31", "ab"),
    ("mul", "31"): ("gl3_mul31", "ab"),
    ("sub_swap", "31"): ("gl3_rsub31", "ab"),
    ("add", "33"): ("gl3_add", "ab"),
    ("sub", "33"): ("gl3_sub", "ab"),
    ("mul", "33"): ("gl3_mul", "ab"),
    ("sub_swap", "33"): ("gl3_sub", "ba"),
    ("copy", "1"): ("", "a"),
    ("copy", "3"): ("", "a"),
}
C_TYPE = {1: "uint64_t", 3: "gl3"}
#: the accumulator types of a value kept as accumulators (render_model.acc_values)
ACC_TYPE = {1: "gl_acc", 3: "gl3_acc"}
_SCALAR_BUF = {"public": "publics", "challenge": "challenges", "eval": "evals",
               "airvalue": "airvalues", "airgroupvalue": "airgroupvalues",
               "proofvalue": "proofvalues"}


def _i(x: int) -> str:
    """Format a validated integer (never anything else) into C."""
    return str(check_int(x))


def _row(shift: int) -> str:
    return "row" if shift == 0 else f"EXPS_ROW({_i(shift)})"


#: a row base's name prefix and what it is an offset from (render_model.Base sections)
_BASE = {"aux": ("exps_rb", "X.aux"), "cst": ("exps_cb", "(const char*)X.cst"),
         "trace": ("exps_tb", "(const char*)X.cm[1]")}


def _base_name(b: Base) -> str:
    """`exps_rb` (the aux trace at the row; at a shifted row `exps_rb_m1`, `exps_rb_p1`, ...),
    `exps_cb` (the const tree: `exps_cb_m1`, `exps_cb_p1`, ...), `exps_tb` (the trace: `exps_tb_m1`,
    `exps_tb_p1`, ...), `exps_sb` (the scratch at the wave's row)."""
    if b.section == "scratch":
        return "exps_sb"
    shift = "" if b.shift == 0 else (f"_m{_i(-b.shift)}" if b.shift < 0 else f"_p{_i(b.shift)}")
    return _BASE[b.section][0] + shift


def declarations(at: Offsets) -> list[str]:
    """The row bases a kernel's addressed loads and stores use, declared once (first-use order)."""
    return ["char* const exps_sb = (char*)scratch + (lo << 3);" if b.section == "scratch" else
            f"const char* const {_base_name(b)} = {_BASE[b.section][1]} + ((uint64_t){_row(b.shift)} << 3);"
            for b in at.bases]


def _addr(got: tuple[int, Base]) -> str:
    slot, base = got
    return f"(const uint64_t*)({_base_name(base)} + O.v[{_i(slot)}])"


def _leaf_c(lf: Leaf, at: Offsets | None = None) -> str:
    """The C text of a load of `lf`; its column words and the zerofier at their exps_offs entries
    in `at` (`(const uint64_t*)(exps_rb + O.v[i])`: docs/DESIGN-column-offsets.md), those with no
    entry (or no `at`) at their own address arithmetic (`X.cm[s] + ((uint64_t)c << X.lg) + row`)."""
    if lf.kind == "number":
        if not 0 <= lf.value < 1 << 64:
            raise ValueError(f"number literal out of range: {lf.value}")
        return f"{_i(lf.value)}ull"
    if lf.kind == "zi":
        z = at.zerofier() if at is not None else None
        return "EXPS_LD(X.zi + row)" if z is None else f"EXPS_LD({_addr(z)})"
    if lf.kind in ("cm", "const"):
        base = f"X.cm[{_i(lf.stage)}]" if lf.kind == "cm" else "X.cst"
        comps = []
        for d in range(lf.dim):
            got = at.column(lf, d) if at is not None else None
            comps.append(f"EXPS_LD({base} + ((uint64_t){_i(lf.col + d)} << X.lg) + {_row(lf.shift)})"
                         if got is None else f"EXPS_LD({_addr(got)})")
    elif lf.kind in _SCALAR_BUF:
        comps = [f"EXPS_LD(X.{_SCALAR_BUF[lf.kind]} + {_i(lf.col + d)})" for d in range(lf.dim)]
    else:
        raise ValueError(f"no C rendering for leaf kind {lf.kind!r}")
    return comps[0] if lf.dim == 1 else f"gl3_make({', '.join(comps)})"


def _arg_c(a, names: dict[int, str], at: Offsets | None = None, acc=()) -> str:
    """An operand's text: a value's name (`a<id>` for one kept as accumulators, in `acc`), a load
    (`_leaf_c`), or text given as is."""
    if isinstance(a, str):
        return a
    if isinstance(a, Val):
        return f"a{_i(a.id)}" if a.id in acc else names[a.id]
    return _leaf_c(a, at)


def _args_c(args: list, names: dict[int, str], at: Offsets | None = None, acc=()) -> list[str]:
    """The texts of one line's operands, `args` in the order the line prints them (`_arg_c`). The
    line's columns take their exps_offs entries first, in that order, then its zerofier."""
    if at is not None:
        for a in args:
            if isinstance(a, Leaf) and a.kind in ("cm", "const"):
                for d in range(a.dim):
                    at.column(a, d)
    return [_arg_c(a, names, at, acc) for a in args]


#: the Q kernels' value-only forms (docs/DESIGN-value-path.md): right modulo p, not necessarily the
#: production word; the last chunk stores canon(v) or runs the exact program (codegen/program.py)
OP_C_VALUE = {**OP_C, ("mul", "33"): ("gl3_mul_v", "ab")}


def _op_line(i: int, op: Op, names: dict[int, str], value: bool = False, at: Offsets | None = None,
             words: dict[tuple[int, int], int] | None = None) -> str:
    """`const <type> v<i> = <op>;`; an operand j of op i in `words` is exps_offs word `O.v[k]`."""
    form = (OP_C_VALUE if value else OP_C).get((op.arith, op.shape))
    if form is None:
        raise ValueError(f"no C rendering for op {op.arith} with shape {op.shape}")
    fn, order = form
    words = words or {}
    args = [f"O.v[{_i(words[(i, j)])}]" if (i, j) in words else x
            for j, x in ({"a": (0, op.a), "b": (1, op.b)}[o] for o in order)]
    texts = _args_c(args, names, at)
    rhs = f"{fn}({', '.join(texts)})" if fn else texts[0]
    return f"const {C_TYPE[op.dim]} v{i} = {rhs};"


def _scratch_c(slot: int, d: int, at: Offsets | None = None) -> str:
    """Word `d` of scratch slot `slot`: at its exps_offs entry in `at` (`(*(uint64_t*)(exps_sb +
    O.v[i]))`), or with no entry (or no `at`) at its own arithmetic."""
    i = at.scratch(slot + d) if at is not None else None
    return f"scratch[{_i(slot + d)} * wave + lo]" if i is None else f"(*(uint64_t*)(exps_sb + O.v[{_i(i)}]))"


def _read(ir: KernelIR) -> set[int]:
    """Values some op reads, plus the result (the others are dead: marked used for the compilers)."""
    out = {a.id for op in ir.ops for a in op.args() if isinstance(a, Val)}
    out.add(len(ir.ops) - 1)
    return out


_ACC_MUL = {("mul", "11"): "gl_acc_mul", ("mul", "33"): "gl3_acc_mul", ("mul", "31"): "gl3_acc_mul31"}
_ACC_31 = {"add": "gl3_acc_add31", "sub": "gl3_acc_sub31", "sub_swap": "gl3_acc_rsub31"}


def _acc_expr(op: Op, names: dict[int, str], acc: dict[int, int], at: Offsets | None = None) -> str:
    """The C expression of `op` over accumulators (a gl3_acc, or a gl_acc for shape 11): a product's
    accumulators, or an add or sub whose accumulator operands are `a<id>` and whose others are words."""
    kind = (op.arith, op.shape)
    if kind in _ACC_MUL:
        x, y = _args_c([op.a, op.b], names, at)
        return f"{_ACC_MUL[kind]}({x}, {y})"
    if kind not in ACC_USE:
        raise ValueError(f"no accumulator form of op {op.arith} with shape {op.shape}")

    def kept(a) -> bool:
        return isinstance(a, Val) and a.id in acc

    if op.shape == "31":             # a the dim-3 operand, b a base-field word
        x, y = _args_c([op.a, op.b], names, at, acc)
        return f"{_ACC_31[op.arith]}({x if kept(op.a) else f'gl3_acc_w({x})'}, {y})"
    xa, ya = (op.b, op.a) if op.arith == "sub_swap" else (op.a, op.b)       # x - y for a sub
    if op.shape == "11":
        x, y = _args_c([xa, ya], names, at, acc)
        f = "gl_acc_add" if op.arith == "add" else "gl_acc_sub"
        return f"{f}({x if kept(xa) else f'gl_acc_w({x})'}, {y if kept(ya) else f'gl_acc_w({y})'})"
    if op.arith == "add":
        if kept(xa) and kept(ya):
            return "gl3_acc_add({}, {})".format(*_args_c([xa, ya], names, at, acc))
        if kept(xa) or kept(ya):        # the accumulators, then the word
            return "gl3_acc_addw({}, {})".format(*_args_c([xa, ya] if kept(xa) else [ya, xa], names, at, acc))
        return "gl3_acc_addw(gl3_acc_w({}), {})".format(*_args_c([xa, ya], names, at, acc))
    x, y = _args_c([xa, ya], names, at, acc)
    if kept(xa) and kept(ya):
        return f"gl3_acc_sub({x}, {y})"
    if kept(xa):
        return f"gl3_acc_subw({x}, {y})"
    if kept(ya):
        return f"gl3_acc_wsub({x}, {y})"
    return f"gl3_acc_subw(gl3_acc_w({x}), {y})"


def chunk_body(ir: KernelIR, pl: Plan, c: int, read: set[int] | None = None, value: bool = True,
               users: dict[int, int] | None = None, at: Offsets | None = None) -> list[str]:
    """Lines of chunk `c`: lazy scratch loads, ops, stores right after definition. What each op
    runs is decided first (`render_model.chunk_forms`: on the value path OP_C_VALUE, `value_op`,
    the `distributed` products and the values `acc_values` keeps as accumulators); its columns,
    zerofier and scratch slots at their entries in `at` (a kernel's exps_offs: `declarations(at)`
    and `at.descs()` once the body is made), or with no `at` at their own address arithmetic."""
    f = chunk_forms(ir, pl, c, value, users)
    names: dict[int, str] = {}
    lines: list[str] = []
    stored = set(pl.stores[c])
    read = _read(ir) if read is None else read
    squares: dict[Leaf, str] = {}
    for i in range(f.start, f.end):
        if i in f.skip:                 # (a distributed product's operands: not computed)
            continue
        op = f.op(i)
        args = op.args() if i not in f.dist else (f.dist[i][1], f.dist[i][2])
        for a in args:
            if isinstance(a, Val) and a.id < f.start and a.id not in names:
                s = pl.slot_of[a.id]
                if a.dim == 1:
                    lines.append(f"const uint64_t v{a.id} = {_scratch_c(s, 0, at)};")
                else:
                    lines.append(f"const gl3 v{a.id} = gl3_make({_scratch_c(s, 0, at)}, "
                                 f"{_scratch_c(s, 1, at)}, {_scratch_c(s, 2, at)});")
                names[a.id] = f"v{a.id}"
        if i in f.dist:
            ch, x, y = f.dist[i][:3]
            if ch not in squares:       # `const gl3 sq0`, sq1, ...: in the order of their first use
                squares[ch] = f"sq{_i(len(squares))}"
                c1, c2 = _args_c([ch, ch], names, at)
                lines.append(f"const gl3 {squares[ch]} = gl3_mul_v({c1}, {c2});")
            xc, cc, yc = _args_c([x, ch, y], names, at)
            e = f"gl3_acc_add(gl3_acc_mul31({squares[ch]}, {xc}), gl3_acc_mul31({cc}, {yc}))"
            if i in f.acc:
                lines.append(f"const gl3_acc a{i} = {e};")
                continue
            lines.append(f"const gl3 v{i} = gl3_acc_red({e});")
        elif i in f.acc:
            lines.append(f"const {ACC_TYPE[op.dim]} a{i} = {_acc_expr(op, names, f.acc, at)};")
            continue
        elif any(isinstance(a, Val) and a.id in f.acc for a in op.args()):
            red = "gl_acc_red" if op.dim == 1 else "gl3_acc_red"
            lines.append(f"const {C_TYPE[op.dim]} v{i} = {red}({_acc_expr(op, names, f.acc, at)});")
        else:
            lines.append(_op_line(i, op, names, value=f.value, at=at))
        names[i] = f"v{i}"
        if i not in read:
            lines.append(f"(void)v{i};")
        if i in stored:
            s = pl.slot_of[i]
            if op.dim == 1:
                lines.append(f"{_scratch_c(s, 0, at)} = v{i};")
            else:
                lines.extend(f"{_scratch_c(s, d, at)} = v{i}.v{d};" for d in range(3))
    return lines


def expr_body(ir: KernelIR, at: Offsets | None = None,
              words: dict[tuple[int, int], int] | None = None) -> list[str]:
    """Lines of a trace-domain expression: its loads at their entries in `at` (an
    `Offsets(trace=True)`, as `chunk_body`), the literal operands in `words` ({(op, operand): slot},
    `render_model.literal_words`) read from exps_offs (`O.v[slot]`)."""
    names: dict[int, str] = {}
    lines = []
    read = _read(ir)
    for i, op in enumerate(ir.ops):
        lines.append(_op_line(i, op, names, at=at, words=words))
        names[i] = f"v{i}"
        if i not in read:
            lines.append(f"(void)v{i};")
    return lines


def result_c(ir: KernelIR) -> str:
    n = len(ir.ops) - 1
    return f"v{n}" if ir.out_dim == 3 else f"gl3_make(v{n}, 0, 0)"


@dataclass
class KernelSource:
    """Everything emit needs for one kernel key.

    With `passes` (the default) the Q IR and each expression's go through `codegen.passes.optimize`
    (CSE, dead code); Q is then re-planned into (at most) as many chunks as the given plan has, of
    equal size: `q` and `plan` are then what is emitted (and what `exps_min_scratch` reports);
    `q_in` keeps the IR as given and `pass_stats` the counts. Keeping the chunk count keeps chunk c
    of a tuning probe the c-th kernel the tuner measured. Then `codegen.remat`: the cheap values
    that cross a cut are recomputed in the chunks that read them (same chunks; `remat_copies` ops
    added)."""

    key: str
    q: KernelIR
    plan: Plan
    exprs: list[ExprKernel] = field(default_factory=list)
    source_hash: str = ""
    passes: bool = True
    #: a single Q kernel bounded to `min_blocks` blocks per SM (autotune.bound_single; 0: none): in
    #: an autotune probe (`render_probe`) its `__launch_bounds__(256, min_blocks)`; in the kernel's
    #: sources (`render`) the kernel as unbounded, and its TU's bounded twin with that bound, which
    #: `cc` compiles from source, as a chunked Q's (`launch_table` "twins")
    min_blocks: int = 0
    q_in: KernelIR | None = field(default=None, init=False)
    pass_stats: PassStats | None = field(default=None, init=False)
    #: ops added by codegen.remat (cheap values recomputed in the chunks that read them)
    remat_copies: int = field(default=0, init=False)
    # what q_part / x_parts made of (q, plan) and exprs (made again when either is replaced)
    _q_parts: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _x_parts: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.q_in = self.q
        if self.passes:
            # each trace-domain expression through the same passes: the bytecode repeats
            # subexpressions, e.g. Intermediates' sums of fractions add a challenge to each of 17
            # columns 70 times; nvcc folded them (the same SASS instruction counts) after
            # parsing and scheduling them all (that TU's nvcc CPU -11%, docs/BENCHMARKS.md)
            self.exprs = [replace(x, ir=optimize(x.ir)[0]) for x in self.exprs]
        if not self.passes or self.q is None or not self.q.ops:
            return
        q, st = optimize(self.q)
        self.pass_stats = st
        if st.ops_out != st.ops_in:
            n = self.plan.n_chunks
            self.q = q
            self.plan = plan(q, -(-len(q.ops) // n) if n > 1 else 0)
        self.q, self.plan, self.remat_copies = remat(self.q, self.plan)


#: the name of a Q chunk kernel's per-row function, `k<digest>_q_c<chunk>` (its kernel `..._k`, its
#: host form `..._h`), and of an expression's, `k<digest>_x_e<expId>`: the digest is of what the
#: template makes of the kernel (`kernel_name`), never the kernel key, so identical kernels of two
#: AIRs are identical text and their TUs one object-cache entry, compiled once
Q_KERNEL_RE = re.compile(r"k[0-9a-f]{16}_q_c(\d+)_k")
X_KERNEL_RE = re.compile(r"k[0-9a-f]{16}_x_e(\d+)_k")


def kernel_name(kind: str, n: int, fields: list) -> str:
    """`k<16 hex digits>_<kind><n>`: the digest is sha256 over `kind`, `n` and `fields`, every
    input of the kernel's template text other than its name (its body lines, result, dims, store
    flags; for a Q chunk whether it is the last, the plan's single-kernel flag, the output). Two
    different kernels of one `.so` never share a name: `n` (chunk index, expId) is unique in it;
    expressions of one shape share one kernel, named after the first (`x_parts`)."""
    d = hashlib.sha256(json.dumps([kind, n, fields], separators=(",", ":")).encode()).hexdigest()
    return f"k{d[:16]}_{kind}{_i(n)}"


def q_part(ks: KernelSource, c: int) -> dict:
    """Chunk `c` of `ks` as q_chunks.cu.j2 renders it: index, lines (its row bases, then
    `chunk_body` through the chunk's `Offsets`), last, offs (their descriptors), kname (cached)."""
    if ks._q_parts.get("of") != (id(ks.q), id(ks.plan)):
        ks._q_parts = {"of": (id(ks.q), id(ks.plan))}
    got = ks._q_parts.get(c)
    if got is None:
        ir, pl = ks.q, ks.plan
        if "read" not in ks._q_parts:
            ks._q_parts["read"] = _read(ir)
        last = c == pl.n_chunks - 1
        if "value" not in ks._q_parts:          # once per kernel: it counts every op
            ks._q_parts["value"] = uses_value_path(ir)
        value = ks._q_parts["value"]
        if "users" not in ks._q_parts:
            ks._q_parts["users"] = single_users(ir)
        at = Offsets()
        body = chunk_body(ir, pl, c, ks._q_parts["read"], value, ks._q_parts["users"], at)
        lines, offs = declarations(at) + body, at.descs()
        # the last chunk holds the exact program its rows fall back to (codegen/program.py)
        prog = exact_program(ir, pl) if last and value else None
        rows = prog.c_rows() if prog else []
        res = prog.c_result() if prog else []
        got = {"index": c, "lines": lines, "last": last, "prog": rows, "prog_res": res,
               "prog_words": prog.local_words if prog else 0, "offs": offs,
               "kname": kernel_name("q_c", c, [lines, last, pl.n_chunks == 1, f"v{len(ir.ops) - 1}",
                                               ir.out_dim, rows, res, offs])}
        ks._q_parts[c] = got
    return got


def x_parts(ks: KernelSource) -> list[dict]:
    """The expressions of `ks` (in `ks.exprs` order) as exprs.cu.j2 renders them (cached): each
    through an `Offsets(trace=True)` of its own, the literals that tell it apart from expressions
    otherwise alike read from it (`render_model.literal_words`: its lines rendered again with them)."""
    of = (id(ks.exprs), len(ks.exprs), *map(id, ks.exprs))
    if ks._x_parts is None or ks._x_parts[0] != of:
        ats = [Offsets(trace=True) for _ in ks.exprs]
        bodies = [expr_body(x.ir, at) for x, at in zip(ks.exprs, ats)]
        words = literal_words([x.ir for x in ks.exprs], ats, [(int(x.num1), bool(x.inv)) for x in ks.exprs])
        out: list[dict] = []
        for x, at, body, w in zip(ks.exprs, ats, bodies, words):
            lines = declarations(at) + (expr_body(x.ir, at, w) if w else body)
            out.append({"exp_id": _i(x.ir.exp_id), "lines": lines, "result": result_c(x.ir),
                        "vdim": x.ir.out_dim, "num1": int(x.num1), "inv": bool(x.inv), "offs": at.descs()})
        first: dict[str, int] = {}      # a shape (the kernel's text but its name) -> its first expression
        for i, (x, d) in enumerate(zip(ks.exprs, out)):
            fields = [d["lines"], d["result"], d["vdim"], d["num1"], d["inv"]]
            # expressions that differ only in the columns they read (their offsets) are one kernel
            # (e.g. Intermediates' 56 expressions are 16 kernels); "of": the expression whose
            # kernel it is, the first of its shape, whose expId names it
            d["of"] = first.setdefault(json.dumps(fields, separators=(",", ":")), i)
            d["kname"] = out[d["of"]]["kname"] if d["of"] != i else kernel_name("x_e", x.ir.exp_id, fields)
        ks._x_parts = (of, out)
    return ks._x_parts[1]


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


_ENV: jinja2.Environment | None = None


def env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = _env()
    return _ENV


def _groups(sizes: list[int], limit: int) -> list[list[int]]:
    """Consecutive groups of item indices with at most ~limit total size each."""
    groups, cur, tot = [], [], 0
    for i, s in enumerate(sizes):
        if cur and tot + s > limit:
            groups.append(cur)
            cur, tot = [], 0
        cur.append(i)
        tot += s
    if cur:
        groups.append(cur)
    return groups


#: the kernel key is the one name formatted into C (symbols, file names): a C identifier short
#: enough that `<key>_q0_x0.cu` & co. stay below NAME_MAX (discover makes keys of <= 209 characters)
KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,219}")


def render(ks: KernelSource, tu_ops: int = TU_OPS) -> dict[str, str]:
    """The sources of a kernel: its device TUs, the parts of `render_parts` packed in order into TUs
    of at most ~tu_ops ops (`pack`), and its launch table `<key>_abi.cpp` (`render_abi`). A small
    kernel is ONE device TU, `<key>_q0_x0.cu`: one nvcc run instead of three; a large one
    keeps its parts apart (`<key>_q<k>.cu`, ...), so its compiles run in parallel and stay linear in
    ops. The device TUs are compiled device code only (`nvcc -fatbin`); the table, data only, embeds
    their fatbins; the launcher that reads it (`RUNTIME`) is the same file for every kernel.
    A chunked Q's chunks are TUs of their own (`Q_TU_OPS`), its last chunk alone, apart from the
    expressions' TUs.
    A kernel with the generic inverse kernel has it alone in its last device TU, `exps_xinv.cu`
    (`generic_inverse_tu`), the same name and text in every kernel: one object-cache entry per
    machine (and one compiler-launcher entry for every machine sharing its store)."""
    parts = render_parts(ks, tu_ops)
    groups = _tu_groups(ks, tu_ops)
    files = {_tu_name(ks.key, g): "".join(parts[n] for n in g) for g in groups}
    files[f"{ks.key}_abi.cpp"] = render_abi(ks, tu_ops)
    return files


def device_tus(files) -> list[str]:
    """The device TUs among a kernel's source names, in the order of their fatbins in its launch
    table (`f<i>.fatbin` is the i-th): by name, the generic inverse kernel's (`XINV_TU`) last."""
    return sorted(n for n in files if n.endswith(".cu") and n != XINV_TU) + [n for n in files if n == XINV_TU]


#: Itanium-mangled parameter lists of the kernel signatures (q_chunks.cu.j2, exprs.cu.j2, x_inv.cu.j2):
#: (const StepsParams*, uint64_t*, uint64_t*, 7 x uint64_t, exps_offs), (const StepsParams*, uint64_t*,
#: 9 x uint64_t, unsigned, exps_offs) and the generic inverse kernel's, the latter without exps_offs;
#: uint64_t is `unsigned long` (m) on the 64-bit Linux hosts nvcc builds for.
#: The build checks every name against the kernels ptxas compiled (kernelcc.check_kernel_names).
Q_PARAMS = "PK11StepsParamsPmS2_mmmmmmm9exps_offs"
X_PARAMS = "PK11StepsParamsPmmmmmmmmmmj9exps_offs"
XINV_PARAMS = "PK11StepsParamsPmmmmmmmmmmj"


def kernel_symbol(name: str, params: str) -> str:
    """The symbol of the global-namespace function `name` with mangled parameter list `params`."""
    return f"_Z{len(name)}{name}{params}"


def _part_names(ks: KernelSource, tu_ops: int) -> tuple[list[list[int]], list[list[int]]]:
    """The chunks of each Q part and the expressions of each expression part. A single kernel is
    one part; a chunked Q's chunks are parts of ~Q_TU_OPS ops (at most tu_ops), the last chunk one
    of its own (`Q_TU_OPS`)."""
    sizes = [b - a for a, b in ks.plan.chunks]
    if len(sizes) == 1:
        q_groups = [[0]]
    else:
        q_groups = _groups(sizes[:-1], min(Q_TU_OPS, tu_ops)) + [[len(sizes) - 1]]
    # the expressions whose kernels the TUs hold: one of each shape (x_parts "of")
    own = [i for i, d in enumerate(x_parts(ks)) if d["of"] == i] if ks.exprs else []
    x_groups = [[own[j] for j in g] for g in _groups([len(ks.exprs[i].ir.ops) for i in own], tu_ops)]
    return q_groups, x_groups


def _tu_groups(ks: KernelSource, tu_ops: int) -> list[list[str]]:
    """The part names of each device TU (`pack`'s grouping by weight; no text needed): a chunked
    Q's parts are TUs of their own, then the expressions' parts packed (`_pack_groups`); a single
    kernel's part packed with the expressions'."""
    q_groups, x_groups = _part_names(ks, tu_ops)
    weights = {f"{ks.key}_q{g}.cu": sum(b - a for a, b in (ks.plan.chunks[c] for c in idx))
               for g, idx in enumerate(q_groups)}
    weights.update({f"{ks.key}_x{g}.cu": sum(len(ks.exprs[i].ir.ops) + STORE_OPS for i in idx)
                    for g, idx in enumerate(x_groups)})
    names = list(weights)
    inv = generic_inverse_tu(ks)
    if inv is not None:         # alone in a TU of its own, whatever its weight (`_pack_groups`)
        names.append(inv)
    if ks.plan.n_chunks > 1:
        n = len(q_groups)
        return [[q] for q in names[:n]] + _pack_groups(names[n:], weights, tu_ops)
    return _pack_groups(names, weights, tu_ops)


def _tu_name(key: str, group: list[str]) -> str:
    return group[0] if len(group) == 1 else \
        f"{key}_" + "_".join(n[len(key) + 1:-len(".cu")] for n in group) + ".cu"


def _offs_c(descs: list[int]) -> dict[str, str]:
    """A kernel's exps_offs descriptors as abi.cpp.j2 writes them: `offs` (C list) and `n_offs`."""
    return {"offs": ", ".join(f"{_i(d)}ull" for d in descs), "n_offs": _i(len(descs))}


def q_symbols(ks: KernelSource, c: int) -> tuple[str, str]:
    """The symbols of Q chunk c's kernel as emitted and of its bounded twin (`_kb`)."""
    n = q_part(ks, c)["kname"]
    return kernel_symbol(f"{n}_k", Q_PARAMS), kernel_symbol(f"{n}_kb", Q_PARAMS)


def launch_table(ks: KernelSource, tu_ops: int = TU_OPS) -> dict:
    """Where every kernel function of `ks` lives: `q` per chunk (launch order) and `exprs` (by
    expId) as dicts of lib (index into `device_tus`), sym (its symbol in that TU's fatbin; an
    expression's WRITE kernel, and sym_inv its kernel of the inverse modes), host (the host check's
    form); `tus` the device TU names in fatbin order."""
    if not isinstance(ks.key, str) or not KEY_RE.fullmatch(ks.key):
        raise ValueError(f"kernel key {ks.key!r:.80} is not a C identifier of at most 220 characters")
    key = ks.key
    q_groups, x_groups = _part_names(ks, tu_ops)
    tu_of = {n: _tu_name(key, g) for g in _tu_groups(ks, tu_ops) for n in g}
    tus = device_tus(set(tu_of.values()))
    lib = {n: tus.index(t) for n, t in tu_of.items()}
    q = [None] * ks.plan.n_chunks
    for g, idx in enumerate(q_groups):
        for c in idx:
            part = q_part(ks, c)
            q[c] = {"lib": lib[f"{key}_q{g}.cu"], "sym": q_symbols(ks, c)[0], "host": f"{part['kname']}_h",
                    **_offs_c(part["offs"])}
    exprs = []
    xs = x_parts(ks)
    group = {i: g for g, idx in enumerate(x_groups) for i in idx}
    for i, x in enumerate(ks.exprs):    # its shape's kernel, in the TU of the first of that shape
        n = xs[i]["kname"]
        exprs.append({"exp_id": xs[i]["exp_id"], "lib": lib[f"{key}_x{group[xs[i]['of']]}.cu"],
                      "sym": kernel_symbol(f"{n}_k", X_PARAMS),
                      "sym_inv": kernel_symbol(f"{n}_ki", X_PARAMS) if x.inv else "",
                      "host": f"{n}_h", "vdim": _i(x.ir.out_dim), "num1": int(x.num1), **_offs_c(xs[i]["offs"])})
    exprs.sort(key=lambda x: int(x["exp_id"]))
    if len({x["exp_id"] for x in exprs}) != len(exprs):
        raise ValueError(f"kernel {key}: two expression kernels of one expId")
    g = generic_inverse_tu(ks)
    inv = None if g is None else {"lib": lib[g], "sym": kernel_symbol("exps_x_inv_k", XINV_PARAMS),
                                  "host": "exps_x_inv_h"}
    # a chunked Q: each device TU holding chunk kernels may get a bounded twin (build/bounds.py),
    # its fatbin slot after the device TUs'; chunk c then has twin_lib and twin_sym (`<name>_kb`).
    # A single kernel the tune bounded (`ks.min_blocks`) gets one, its bound fixed ("blocks")
    twins = []
    if ks.plan.n_chunks > 1 or ks.min_blocks:
        for i, t in enumerate(tus):
            cs = [c for c in range(ks.plan.n_chunks) if q[c]["lib"] == i]
            if cs:
                twins.append({"tu": t, "lib": len(tus) + len(twins), "chunks": cs})
                if ks.plan.n_chunks == 1:
                    twins[-1]["blocks"] = int(_i(ks.min_blocks))
                for c in cs:
                    q[c]["twin_lib"] = twins[-1]["lib"]
                    q[c]["twin_sym"] = q_symbols(ks, c)[1]
    return {"tus": tus, "q": q, "exprs": exprs, "inv": inv, "twins": twins}


def tu_twins(ks: KernelSource, tu_ops: int = TU_OPS) -> list[dict]:
    """The bounded twins a chunked Q's device TUs may get (the manifest's `twins`, what cc reads):
    per twin, in fatbin-slot order, its TU, its slot (`lib`) and per chunk kernel it holds
    [chunk, symbol, twin's symbol]; for a single Q kernel bounded by its tune (`ks.min_blocks`) the
    one twin of its TU with that bound (`blocks`); none for another single kernel."""
    t = launch_table(ks, tu_ops)
    return [{"tu": w["tu"], "lib": w["lib"], "chunks": [[c, t["q"][c]["sym"], t["q"][c]["twin_sym"]]
                                                        for c in w["chunks"]],
             **({"blocks": w["blocks"]} if "blocks" in w else {})} for w in t["twins"]]


def generic_inverse_tu(ks: KernelSource) -> str | None:
    """The device TU of the kernel's generic inverse kernel (`exps_x_inv_k`, for the inverse modes
    of the expressions with no `_ki` of their own), `exps_xinv.cu` (`XINV_TU`): that kernel alone
    (templates/x_inv.cu.j2), the same text in every kernel that has it, so the content-addressed
    object cache compiles it once per machine and every other kernel takes it from there (in an
    expression TU it would be compiled again in every kernel: ~0.3 s of cicc + ptxas each).
    Its name has no key either (a compiler launcher's cache keys the command line), and it is the
    kernel's last device TU (`device_tus`). None when every expression has its own `_ki` (or there
    is none)."""
    return XINV_TU if any(not x.inv for x in ks.exprs) else None


def tu_kernels(ks: KernelSource, tu_ops: int = TU_OPS) -> dict[str, list[str]]:
    """{device TU name: symbols of the kernels its fatbin must hold} (the build's name check)."""
    t = launch_table(ks, tu_ops)
    out: dict[str, list[str]] = {n: [] for n in t["tus"]}
    for k in (*t["q"], *t["exprs"], *([t["inv"]] if t["inv"] else [])):
        out[t["tus"][k["lib"]]].extend(n for n in (k["sym"], k.get("sym_inv")) if n)
    return {tu: list(dict.fromkeys(names)) for tu, names in out.items()}    # (a shared kernel once)


def render_abi(ks: KernelSource, tu_ops: int = TU_OPS) -> str:
    """`<key>_abi.cpp`: the kernel's launch table (templates/abi.cpp.j2, exps_abi.h). Only validated
    integers, C identifiers (the key) and hex (the source hash) are formatted into it."""
    if not all(c in "0123456789abcdef" for c in ks.source_hash):
        raise ValueError("source hash must be hex")
    t = launch_table(ks, tu_ops)
    pl = ks.plan
    return env().get_template("abi.cpp.j2").render(
        key=ks.key, abi_header=ABI_HEADER, tus=t["tus"], q=t["q"], exprs=t["exprs"], inv=t["inv"], twins=t["twins"],
        total_slots=_i(pl.total_slots), min_scratch=_i(pl.min_scratch),
        emitter_version=EMITTER_VERSION, source_hash=ks.source_hash,
        hash_offset=len("exps-codegen-id:") + len(EMITTER_VERSION) + 1)


def _pack_groups(names: list[str], weights: dict[str, int], tu_ops: int) -> list[list[str]]:
    groups: list[list[str]] = []
    tot = 0
    alone = False       # the last group is the generic inverse kernel's (`XINV_TU`): never joined
    for n in names:
        w = weights.get(n, 0)
        if n == XINV_TU:
            groups.append([n])
            alone = True
            continue
        if not groups or alone or (w and tot + w > tu_ops):
            groups.append([])
            tot = 0
            alone = False
        groups[-1].append(n)
        tot += w
    return groups


def pack(key: str, parts: dict[str, str], weights: dict[str, int], tu_ops: int = TU_OPS) -> dict[str, str]:
    """Consecutive parts (in the given order) joined into TUs of at most tu_ops total weight; a part
    absent from `weights` weighs 0 and always joins the TU before it; the generic inverse kernel's
    part (`exps_xinv.cu`) is always a TU of its own. A TU of one part keeps its
    name; a TU of several is `<key>_<their suffixes joined by _>.cu` (e.g. `<key>_q0_x0.cu`) and
    its text is theirs, in order: every part includes the (guarded) common header and defines only
    its own names."""
    return {_tu_name(key, g): "".join(parts[n] for n in g)
            for g in _pack_groups(list(parts), weights, tu_ops)}


def render_parts(ks: KernelSource, tu_ops: int = TU_OPS) -> dict[str, str]:
    """The device parts of a kernel, each a valid TU: `<key>_q<k>.cu` (the single Q kernel, or Q
    chunks of ~Q_TU_OPS ops and the last chunk alone: `_part_names`),
    then `<key>_x<k>.cu` (expression groups), then `exps_xinv.cu` (the generic inverse kernel, if
    any expression has no `_ki`: `generic_inverse_tu`; its text is the same for every kernel)."""
    e = env()
    key, ir, pl = ks.key, ks.q, ks.plan
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):
        raise ValueError(f"kernel key {key!r:.80} is not a C identifier of at most 220 characters")
    files: dict[str, str] = {}
    q_groups, x_groups = _part_names(ks, tu_ops)
    out_c = len(ir.ops) - 1
    # the device templates get no kernel key: a part's text is its content only (kernel_name)
    for g, idx in enumerate(q_groups):
        files[f"{key}_q{g}.cu"] = e.get_template("q_chunks.cu.j2").render(
            chunks=[q_part(ks, c) for c in idx], single=pl.n_chunks == 1, out=f"v{out_c}",
            out_dim=ir.out_dim, header=COMMON_HEADER, bound="")     # (a bound: the twin's, below)
    xs = x_parts(ks) if x_groups else []
    for g, idx in enumerate(x_groups):
        files[f"{key}_x{g}.cu"] = e.get_template("exprs.cu.j2").render(
            group=g, exprs=[xs[i] for i in idx], header=COMMON_HEADER)
    inv = generic_inverse_tu(ks)
    if inv is not None:     # no key, no group: the same text in every kernel
        files[inv] = e.get_template("x_inv.cu.j2").render(header=COMMON_HEADER)
    return files


@functools.cache
def templates_digest() -> str:
    """sha256 of every file in templates/ (names and bytes): the emitter's text, gen_common.cuh's
    arithmetic included, so a `.so` built from other templates never passes as current even if
    EMITTER_VERSION was not bumped."""
    h = hashlib.sha256()
    for p in sorted(TEMPLATES.iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def source_hash(content_digest: str, settings: dict) -> str:
    """Hash of the inputs a kernel is built from (JSON content, emitter version and templates,
    settings)."""
    h = hashlib.sha256()
    h.update(EMITTER_VERSION.encode())
    h.update(templates_digest().encode())
    h.update(content_digest.encode())
    h.update(repr(sorted(settings.items())).encode())
    return h.hexdigest()


ID_RE = re.compile(rb"exps-codegen-id:([0-9A-Za-z.+-]{1,32}):([0-9a-f]{64})")
#: the longest identity string ID_RE matches (a chunked read keeps this much overlap)
_ID_MAX = len(b"exps-codegen-id:") + 32 + 1 + 64
#: a `.so` larger than this is not one of ours (the sample's largest is a few MB)
SO_MAX_BYTES = 1 << 32


class NotRegularError(OSError):
    """A placed `.so` path that is not a regular file (a FIFO, a device, a directory...)."""


def open_so(so: Path):
    """A placed `.so` opened for reading only if it is a regular file of at most SO_MAX_BYTES:
    never blocks on a FIFO, never reads a device (a link to /dev/zero) or a directory. Raises
    NotRegularError (or another OSError: missing, unreadable)."""
    try:
        f = open_regular(so)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.EISDIR):
            raise NotRegularError(e.errno, f"is {e.strerror or 'not a regular file'}", str(so)) from None
        raise
    if os.fstat(f.fileno()).st_size > SO_MAX_BYTES:
        f.close()
        raise NotRegularError(errno.EFBIG, f"is larger than {SO_MAX_BYTES} bytes", str(so))
    return f


def read_so_identity(so: Path) -> tuple[str, str] | None:
    """(emitter version, source hash) embedded in a generated `.so`, or None (no identity, or not
    a regular file: see `open_so`). Read in chunks, so a large library is never held whole."""
    try:
        with open_so(Path(so)) as f:
            tail = b""
            while chunk := f.read(1 << 20):
                buf = tail + chunk      # (an identity cut by a chunk's end is whole in the next)
                if m := ID_RE.search(buf):
                    return m.group(1).decode(), m.group(2).decode()
                tail = buf[-_ID_MAX:]
            return None
    except OSError:
        return None


def render_probe(ks: KernelSource, chunks: list[int]) -> dict[str, str]:
    """One TU with only the given Q chunk kernels of `ks` (autotune compiles a few representative
    chunks of a plan with many: their ptxas reports stand for the rest)."""
    e = env()
    ir, pl = ks.q, ks.plan
    return {f"{ks.key}_qprobe.cu": e.get_template("q_chunks.cu.j2").render(
        chunks=[q_part(ks, c) for c in sorted(set(chunks))], single=pl.n_chunks == 1,
        out=f"v{len(ir.ops) - 1}", out_dim=ir.out_dim, header=COMMON_HEADER, bound=_bound(ks))}


def _bound(ks: KernelSource) -> str:
    """What follows the block size in an autotune probe's Q kernel's `__launch_bounds__`: `, <min
    blocks>` for a single kernel with `ks.min_blocks`, else nothing."""
    if ks.min_blocks and ks.plan.n_chunks == 1:
        return f", {_i(ks.min_blocks)}"
    return ""
