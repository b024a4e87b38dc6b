"""Rematerialization across chunk cuts: recompute a cheap value where a later chunk reads it
instead of storing it to scratch and loading it there.

A chunked Q moves every value that crosses a cut through scratch: a store after its definition and
a load in each later chunk that reads it, 8 bytes each way per word and row, from and to DRAM (a
wave's slots do not fit in L2). On the sample's Large that is ~2,000 words per row beside ~1,600
column loads, and Nsight Compute shows its light chunks DRAM-bound (the command under "Profiling
a kernel" in bench/README.md). About half of those loads are of values whose operands are all
leaves (`col + challenge`, `col * const`, `1 - sel`): a chunk that reads one recomputes it from its
leaves, which it mostly loads anyway, for one op. Ops are deterministic functions of their operands' words
and leaves are inputs no kernel writes, so the copy has the original's words (spec §1).

`remat(ir, plan)` gives a new IR and the plan of the same chunks over it: in each chunk, a copy of
each such value right before its first use there; the original stays where it was defined if its
own chunk reads it, and goes (with its store) if not. The last op is still the result. Not
recomputed: 3x3 products (6 multiplications and ~200 instructions each) and, at `DEPTH` 1, values
with a value operand (their operands would have to cross the cut instead, or be recomputed too).
With it against without on the H200, same run: Intermediates 1.07x (1.09x at the prover's
scratch), Large 1.07x, Medium 1.02x, ConnectionNew 0.99x (`bench/run.py --before` on the two
builds)."""
from __future__ import annotations

from codegen.ir import KernelIR, Op, Val
from codegen.passes import rebuild
from codegen.plan import Plan, plan_chunks

#: ops a later chunk recomputes: everything but the 3x3 product
KEEP_STORED = frozenset({("mul", "33")})
#: how deep a recomputed value's own operands may be recomputed with it: 1 = leaf-only ops; 2 =
#: also ops over leaves and leaf-only values (each such operand copied once per chunk). 1: on the
#: H200 (same run, ample scratch) depth 2 runs ConnectionNew 0.96-0.97x and nothing faster (Large
#: 0.995x, though 1.03x at the prover's scratch: 45 slots instead of 103; docs/BENCHMARKS.md,
#: "Levers tried and rejected")
DEPTH = 1


def depths(ir: KernelIR) -> list[int]:
    """Per value, the depth of the recomputable tree under it (1: a leaf-only op, 2: an op over
    leaves and depth-1 values, ...; 0: not recomputable: a 3x3 product, or an operand that is not)."""
    d = [0] * len(ir.ops)
    for i, op in enumerate(ir.ops):
        if (op.arith, op.shape) in KEEP_STORED:
            continue
        sub = [d[a.id] for a in op.args() if isinstance(a, Val)]
        d[i] = 0 if 0 in sub else 1 + max(sub, default=0)
    return d


def recomputable(ir: KernelIR) -> list[bool]:
    """Per value, whether a later chunk that reads it recomputes it: its depth is 1 to DEPTH."""
    return [0 < d <= DEPTH for d in depths(ir)]


def remat(ir: KernelIR, pl: Plan) -> tuple[KernelIR, Plan, int]:
    """(ir, plan, copies): the cheap values that cross a cut of `pl` recomputed in each chunk that
    reads them. Unchanged (copies 0) for a single kernel or when nothing crosses cheaply. A chunk
    that would be left empty (all its ops cheap values only later chunks read) keeps its values
    stored, so the chunks stay those of `pl`."""
    if pl.n_chunks <= 1:
        return ir, pl, 0
    stored: set[int] = set()
    while True:
        got = _remat(ir, pl, stored)
        if got is None:
            return ir, pl, 0
        if isinstance(got, tuple):
            return got
        stored |= got


def _remat(ir: KernelIR, pl: Plan, stored: set[int]):
    """The rewrite with the values in `stored` kept stored: (ir, plan, copies), None when nothing
    is recomputed, or the set of values to keep stored because their chunk would be empty."""
    ok = recomputable(ir)

    def recompute(v: int) -> bool:
        return v not in stored and ok[v]

    if not any(recompute(v) for ch in pl.loads for v in ch):
        return None
    ops: list[Op] = []
    new_of: dict[int, int] = {}          # original id -> new id of its definition
    bounds = [0]
    copies = 0
    for s, e in pl.chunks:
        local: dict[int, int] = {}       # original id -> new id of this chunk's copy
        for i in range(s, e):
            op = ir.ops[i]

            def arg(a):
                nonlocal copies
                if not isinstance(a, Val):
                    return a
                if a.id < s and recompute(a.id):
                    if a.id not in local:      # its operands first (depth <= DEPTH: short)
                        o = ir.ops[a.id]
                        x = arg(o.a)
                        y = arg(o.b) if o.b is not None else None
                        local[a.id] = len(ops)
                        ops.append(Op(o.arith, o.shape, x, y, o.dim))
                        copies += 1
                    return Val(local[a.id], a.dim)
                return Val(new_of[a.id], a.dim)

            a = arg(op.a)
            b = arg(op.b) if op.b is not None else None
            new_of[i] = len(ops)
            ops.append(Op(op.arith, op.shape, a, b, op.dim))
        bounds.append(len(ops))
    # the recomputed values' originals that their own chunk does not read go (with their stores)
    n = len(ops)
    read = {x.id for op in ops for x in op.args() if isinstance(x, Val)}
    gone = {new_of[v] for v in range(len(ir.ops) - 1) if recompute(v) and new_of[v] not in read}
    live = [i not in gone for i in range(n)]
    kept_before = [0] * (n + 1)
    for i in range(n):
        kept_before[i + 1] = kept_before[i] + live[i]
    chunks = tuple((kept_before[s], kept_before[e]) for s, e in zip(bounds, bounds[1:]))
    empty = {i for c, (s, e) in enumerate(chunks) if s >= e for i in range(*pl.chunks[c])}
    if empty:
        return empty
    new_ir = rebuild(KernelIR(ir.exp_id, ir.extended, tuple(ops)), [i for i in range(n) if live[i]], list(range(n)))
    return new_ir, plan_chunks(new_ir, pl.ops_per_chunk, chunks), copies
