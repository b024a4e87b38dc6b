"""The exact program of a Q expression: its IR as base-field ops on words, for the value path's
fallback.

A Q kernel computes its rows with value-only arithmetic (gl3_mul_v: the right field element, not
necessarily the production word) and stores canon(v) where every output component is >= EPS:
such a value has one u64 encoding, which is therefore the word the production op order gives
(docs/DESIGN-value-path.md). A row with a smaller component is recomputed by
templates/gen_common.cuh's `exps_q_exact`, which runs this program: every IR op lowered to the
base-field ops the header's exact extension ops are made of (gl3_mul: the same 21 adds, subs and
products; gl3_rsub31: a sub and two negations; ...), each a pure function of its input words, so
the program gives the words the exact kernel text gives. One base op per step keeps the evaluator
small: its registers count toward every Q kernel's (a call's callee is allocated with it).

Where each word lives while the program runs: the components of a value that crosses a chunk cut
in its scratch slots (`Plan.slot_of`, the row's own column of the wave's scratch, which the fast
chunks have finished with when the last chunk runs the program); every other word in a
per-thread local array of `local_words` words (first-fit over live ranges).
"""
from __future__ import annotations

from dataclasses import dataclass

from codegen.ir import KernelIR, Leaf, Val
from codegen.plan import Plan, last_uses

#: base ops of exps_q_exact (templates/gen_common.cuh, EXPS_XOP_*): gl_add, gl_sub, gl_mul, gl_neg, copy
ADD, SUB, MUL, NEG, COPY = 0, 1, 2, 3, 4
#: operand kinds of exps_xarg (EXPS_XA_*)
KINDS = {"local": 0, "slot": 1, "number": 2, "zi": 3, "cm": 4, "const": 5, "public": 6,
         "challenge": 7, "eval": 8, "airvalue": 9, "airgroupvalue": 10, "proofvalue": 11, "none": 15}
NONE = (KINDS["none"], 0, 0, 0)
#: (arith, shape) -> (dim of a, dim of b) of the IR's ops
DIMS = {"11": (1, 1), "31": (3, 1), "33": (3, 3), "1": (1, 0), "3": (3, 0)}
#: the IR ops the program lowers: every arith and shape the emitter renders
LOWERED = frozenset({(x, sh) for x in ("add", "sub", "mul", "sub_swap") for sh in ("11", "31", "33")}
                    | {("copy", "1"), ("copy", "3")})


@dataclass(frozen=True)
class Program:
    """`ops`: (op, dst kind, dst word, arg a, arg b), each arg (kind, stage, shift, v): a word of
    the local array or of a scratch slot (v), a number (v), zi, or component d of a leaf (v =
    its column + d); `result`: the args of the result's components (local words);
    `local_words`: the local array exps_q_exact needs."""

    ops: tuple[tuple, ...]
    result: tuple[tuple, ...]
    local_words: int

    def c_result(self) -> list[str]:
        """The initializer rows of the result's `exps_xarg` array (3 rows; dim 1: two unused)."""
        rows = list(self.result) + [NONE] * (3 - len(self.result))
        return [f"{{{k}u, {stage}u, {shift}ll, {v}ull}}" for k, stage, shift, v in rows]

    def c_rows(self) -> list[str]:
        """The initializer rows of the `exps_xop` array (templates/q_chunks.cu.j2)."""
        def arg(a: tuple) -> str:
            k, stage, shift, v = a
            return f"{{{k}u, {stage}u, {shift}ll, {v}ull}}"
        return [f"{{{op}u, {dk}u, {dst}ull, {arg(a)}, {arg(b)}}}" for op, dk, dst, a, b in self.ops]


def _leaf_words(lf: Leaf, dim: int) -> list[tuple]:
    if lf.kind in ("local", "slot", "none") or lf.kind not in KINDS:
        raise ValueError(f"no exact-program operand for leaf kind {lf.kind!r}")
    if lf.kind == "number":
        if not 0 <= lf.value < 1 << 64:
            raise ValueError(f"number literal out of range: {lf.value}")
        if dim != 1:
            raise ValueError("a number literal is a base-field value")
        return [(KINDS["number"], 0, 0, int(lf.value))]
    if lf.kind == "zi":
        return [(KINDS["zi"], 0, 0, 0)]
    for name, x, lo, hi in (("stage", lf.stage, 0, 1 << 31), ("col", lf.col, 0, 1 << 62),
                            ("shift", lf.shift, -(1 << 62), 1 << 62)):
        if not (isinstance(x, int) and lo <= x < hi):
            raise ValueError(f"leaf {lf.kind}: {name} {x!r} out of range")
    return [(KINDS[lf.kind], int(lf.stage), int(lf.shift), int(lf.col) + d) for d in range(dim)]


def exact_program(ir: KernelIR, pl: Plan) -> Program:
    """The program of `ir` under plan `pl` (see the module doc)."""
    n = len(ir.ops)
    last_use = last_uses(ir)
    last_use[n - 1] = n          # the result outlives the program
    ending: dict[int, list[int]] = {}
    for v, u in enumerate(last_use):
        ending.setdefault(u, []).append(v)
    free: list[bool] = []        # local words: True = free
    words: dict[int, list[tuple]] = {}   # value -> the arg of each component

    def alloc() -> int:
        for s, f in enumerate(free):
            if f:
                free[s] = False
                return s
        free.append(False)
        return len(free) - 1

    def release(w: tuple) -> None:
        if w[0] == KINDS["local"]:
            free[w[3]] = True

    chunk_of = [0] * n
    for c, (s0, e0) in enumerate(pl.chunks):
        for i in range(s0, e0):
            chunk_of[i] = c
    loaded: dict[int, list[tuple]] = {}   # this chunk's copies of values from earlier chunks

    def operand(a, dim: int, i: int) -> list[tuple]:
        if not isinstance(a, Val):
            return _leaf_words(a, dim)
        if a.id in pl.slot_of and chunk_of[a.id] < chunk_of[i]:
            # as the chunk's text does: loaded once, at its first use in the chunk (the planner may
            # give the slot to another value after that load)
            if a.id not in loaded:
                loaded[a.id] = [temp() for _ in range(a.dim)]
                for w, src in zip(loaded[a.id], words[a.id]):
                    emit(COPY, w, src)
            return loaded[a.id]
        return words[a.id]

    ops: list[tuple] = []

    def emit(op: int, dst: tuple, a: tuple, b: tuple = NONE) -> None:
        ops.append((op, dst[0], dst[3], a, b))

    def temp() -> tuple:
        return (KINDS["local"], 0, 0, alloc())

    for i, op in enumerate(ir.ops):
        if i and chunk_of[i] != chunk_of[i - 1]:     # a new chunk: the last one's loaded copies go
            for ws in loaded.values():
                for w in ws:
                    release(w)
            loaded.clear()
        if (op.arith, op.shape) not in LOWERED:
            raise ValueError(f"no exact-program op for {op.arith} with shape {op.shape}")
        da, db = DIMS[op.shape]
        A = operand(op.a, da, i)
        B = operand(op.b, db, i) if db else []
        if i in pl.slot_of:
            dst = [(KINDS["slot"], 0, 0, pl.slot_of[i] + d) for d in range(op.dim)]
        else:
            dst = [temp() for _ in range(op.dim)]
        k, sh = op.arith, op.shape
        if k == "copy":
            for d in range(op.dim):
                emit(COPY, dst[d], A[d])
        elif sh == "11":
            x, y = (B[0], A[0]) if k == "sub_swap" else (A[0], B[0])
            emit({"add": ADD, "sub": SUB, "mul": MUL, "sub_swap": SUB}[k], dst[0], x, y)
        elif sh == "31":
            if k == "mul":                                   # gl3_mul31
                for d in range(3):
                    emit(MUL, dst[d], A[d], B[0])
            elif k == "sub_swap":                            # gl3_rsub31: b - a0, -a1, -a2
                emit(SUB, dst[0], B[0], A[0])
                emit(NEG, dst[1], A[1])
                emit(NEG, dst[2], A[2])
            else:                                            # gl3_add31 / gl3_sub31
                emit(ADD if k == "add" else SUB, dst[0], A[0], B[0])
                emit(COPY, dst[1], A[1])
                emit(COPY, dst[2], A[2])
        elif k in ("add", "sub", "sub_swap"):               # gl3_add / gl3_sub (b - a: sub_swap)
            for d in range(3):
                x, y = (B[d], A[d]) if k == "sub_swap" else (A[d], B[d])
                emit(ADD if k == "add" else SUB, dst[d], x, y)
        else:                                                # gl3_mul, its op order (spec 1.2)
            a0, a1, a2 = A
            b0, b1, b2 = B
            t = {name: temp() for name in ("A01", "A02", "A12", "B01", "B02", "B12", "D", "E", "F", "G",
                                           "R0", "R1", "R2", "s0", "s1", "s2", "s3")}
            emit(ADD, t["A01"], a0, a1)
            emit(ADD, t["A02"], a0, a2)
            emit(ADD, t["A12"], a1, a2)
            emit(ADD, t["B01"], b0, b1)
            emit(ADD, t["B02"], b0, b2)
            emit(ADD, t["B12"], b1, b2)
            emit(MUL, t["D"], a0, b0)
            emit(MUL, t["E"], a1, b1)
            emit(MUL, t["F"], a2, b2)
            emit(SUB, t["G"], t["D"], t["E"])
            emit(MUL, t["R0"], t["A12"], t["B12"])
            emit(MUL, t["R1"], t["A01"], t["B01"])
            emit(MUL, t["R2"], t["A02"], t["B02"])
            emit(ADD, t["s0"], t["R0"], t["G"])
            emit(SUB, dst[0], t["s0"], t["F"])               # R0 + G - F
            emit(ADD, t["s1"], t["R1"], t["R0"])
            emit(SUB, t["s2"], t["s1"], t["E"])
            emit(SUB, t["s3"], t["s2"], t["E"])
            emit(SUB, dst[1], t["s3"], t["D"])               # R1 + R0 - E - E - D
            emit(SUB, dst[2], t["R2"], t["G"])               # R2 - G
            for w in t.values():
                release(w)
        words[i] = dst
        for v in ending.get(i, []):       # values read for the last time here (or never read)
            for w in words[v]:
                release(w)
    return Program(tuple(ops), tuple(words[n - 1]), max(len(free), 1))
