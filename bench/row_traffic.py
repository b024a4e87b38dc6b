#!/usr/bin/env python3
"""Words a chunked Q moves per row (issue #13): per chunk the distinct column words its ops read
(each chunk kernel loads them again) and the scratch words it loads and stores, summed over the
chunks of the plan the emitter makes at `--chunk` ops per chunk (IR passes, plan, remat: as
emit.KernelSource). `--reorder` also tries a list scheduler that reorders the ops (operands and
their order unchanged, any topological order) to reuse the columns a chunk already reads and to
end live ranges, at a few weightings: an experiment, not part of the emitter.

    python3 bench/row_traffic.py provingkey-sample/synth/Basic/airs/Large/air/Large --chunk 64 --reorder
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen.coverage import cover  # noqa: E402
from codegen.emit import KernelSource  # noqa: E402
from codegen.ir import KernelIR, Leaf, Val  # noqa: E402
from codegen.model import load_air  # noqa: E402
from codegen.passes import optimize  # noqa: E402
from codegen.plan import Plan, plan  # noqa: E402
from codegen.remat import remat  # noqa: E402

COPY_GBS = 4272.0       # H200 copy bandwidth measured by bench/run.py (docs/BENCHMARKS.md)


def column(a) -> tuple | None:
    """A leaf that is a trace / constant / zerofier column word (what a chunk loads per row)."""
    if isinstance(a, Leaf) and a.kind in ("cm", "const", "zi"):
        return (a.kind, a.stage, a.col, a.shift, a.dim)
    return None


def traffic(q: KernelIR, pl: Plan) -> tuple[int, int, int]:
    """(column words, scratch words, distinct column words) per row."""
    col = scr = 0
    every: set = set()
    for c, (s, e) in enumerate(pl.chunks):
        cols = {k for op in q.ops[s:e] for a in op.args() if (k := column(a))}
        every |= cols
        col += sum(k[4] for k in cols)
        scr += sum(q.ops[v].dim for v in pl.loads[c]) + sum(q.ops[v].dim for v in pl.stores[c])
    return col, scr, sum(k[4] for k in every)


def reorder(ir: KernelIR, opc: int, w_col: float, w_free: float, w_near: float) -> KernelIR:
    """A topological order chosen greedily: an op scores w_col per column the current chunk (of
    `opc` ops) already reads (- w_col / 2 per new one), w_free per operand it reads last, w_near per
    operand defined in the current chunk; ties keep the IR order; the result stays the last op."""
    n = len(ir.ops)
    users: list[list[int]] = [[] for _ in range(n)]
    for i, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val):
                users[a.id].append(i)
    remaining = [len(u) for u in users]
    deps = [sum(isinstance(a, Val) for a in op.args()) for op in ir.ops]
    ready = {i for i in range(n) if deps[i] == 0}
    order: list[int] = []
    chunk_of: dict[int, int] = {}
    cols: set = set()
    while ready:
        def score(i: int) -> tuple:
            s = 0.0
            for a in ir.ops[i].args():
                k = column(a)
                if k:
                    s += w_col if k in cols else -w_col / 2
                elif isinstance(a, Val):
                    s += w_free * (remaining[a.id] == 1) + w_near * (chunk_of.get(a.id) == len(order) // opc)
            return (s, -i)
        pick = max((i for i in ready if i != n - 1 or len(ready) == 1), key=score)
        ready.discard(pick)
        chunk_of[pick] = len(order) // opc
        order.append(pick)
        if len(order) % opc == 0:
            cols = set()
        for a in ir.ops[pick].args():
            if (k := column(a)):
                cols.add(k)
            elif isinstance(a, Val):
                remaining[a.id] -= 1
        for u in users[pick]:
            deps[u] -= 1
            if deps[u] == 0:
                ready.add(u)
    new = {old: k for k, old in enumerate(order)}

    def m(a):
        return Val(new[a.id], a.dim) if isinstance(a, Val) else a
    ops = tuple(dataclasses.replace(ir.ops[o], a=m(ir.ops[o].a), b=None if ir.ops[o].b is None else m(ir.ops[o].b))
                for o in order)
    return dataclasses.replace(ir, ops=ops)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="an AIR's path without .starkinfo.json")
    ap.add_argument("--chunk", type=int, default=64, help="ops per chunk (default 64)")
    ap.add_argument("--rows", type=int, default=22, help="log2 of the rows for the GB / ms column")
    ap.add_argument("--reorder", action="store_true", help="also the list scheduler's orders")
    a = ap.parse_args()
    si, ei = load_air(f"{a.base}.starkinfo.json", f"{a.base}.expressionsinfo.json")
    q = cover(si, ei).q
    ks = KernelSource("k", q, plan(q, a.chunk), [], "0" * 64)     # what the emitter makes
    forms = [("emitted (IR order)", ks.q, ks.plan)]
    if a.reorder:
        q0, _ = optimize(q)
        for w in [(1, 1, 0.3), (1, 2, 0.5), (2, 1, 0.3), (0.5, 2, 1)]:
            qr = reorder(q0, a.chunk, *w)
            forms.append((f"reordered {w}", *remat(qr, plan(qr, a.chunk))[:2]))
    print("| order | ops | chunks | slots | column words | scratch words | KB / row | ms at the copy bandwidth |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, q2, pl in forms:
        col, scr, distinct = traffic(q2, pl)
        b = (col + scr) * 8
        print(f"| {name} | {len(q2.ops)} | {pl.n_chunks} | {pl.total_slots} | {col} (of {distinct} distinct) "
              f"| {scr} | {b / 1000:.1f} | {b * (1 << a.rows) / COPY_GBS / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
