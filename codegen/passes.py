"""IR passes on the Q expression: fewer ops, the same words.

Every op is a deterministic function of its operands' raw words (spec §1), and a leaf is a load of
an input that no kernel writes while it runs, so:

* `cse`: an op equal to an earlier one (same arith, shape and operands, operand order included:
  `gl_add` is not bitwise commutative) computes the same words; its uses read the earlier value.
* `dce`: an op no later op reads, other than the result (the last op), is dropped.

`optimize` runs both and renumbers values; the result is a `KernelIR` like any other (the last op is
still the result), so the planner, the emitter and the host/GPU checks see nothing special. The
oracle (codegen.check.reference) evaluates the JSON, never this IR.
"""
from __future__ import annotations

from dataclasses import dataclass

from codegen.ir import Arg, KernelIR, Op, Val


@dataclass(frozen=True)
class PassStats:
    ops_in: int
    ops_out: int
    cse_removed: int
    dce_removed: int

    def summary(self) -> dict:
        return {"ops_in": self.ops_in, "ops_out": self.ops_out, "cse": self.cse_removed,
                "dce": self.dce_removed}


def _key(op: Op) -> tuple:
    return (op.arith, op.shape, op.dim, op.a, op.b)


def rebuild(ir: KernelIR, keep: list[int], rep: list[int]) -> KernelIR:
    """Keep ops `keep` (ascending, last op included); operand v reads value rep[v] (a kept op)."""
    new_id = {old: new for new, old in enumerate(keep)}

    def arg(a: Arg | None) -> Arg | None:
        if isinstance(a, Val):
            return Val(new_id[rep[a.id]], a.dim)
        return a

    ops = tuple(Op(ir.ops[i].arith, ir.ops[i].shape, arg(ir.ops[i].a), arg(ir.ops[i].b), ir.ops[i].dim)
                for i in keep)
    return KernelIR(ir.exp_id, ir.extended, ops)


def cse(ir: KernelIR) -> tuple[KernelIR, int]:
    """Common-subexpression elimination; returns (ir, ops removed). The last op is never removed."""
    n = len(ir.ops)
    rep = list(range(n))
    seen: dict[tuple, int] = {}
    keep = []
    for i, op in enumerate(ir.ops):
        a = Val(rep[op.a.id], op.a.dim) if isinstance(op.a, Val) else op.a
        b = Val(rep[op.b.id], op.b.dim) if isinstance(op.b, Val) else op.b
        k = _key(Op(op.arith, op.shape, a, b, op.dim))
        if k in seen and i != n - 1:
            rep[i] = seen[k]
            continue
        seen.setdefault(k, i)
        keep.append(i)
    return rebuild(ir, keep, rep), n - len(keep)


def dce(ir: KernelIR) -> tuple[KernelIR, int]:
    """Drop ops whose value nothing reads (the result, the last op, is always live)."""
    n = len(ir.ops)
    live = [False] * n
    live[n - 1] = True
    for i in range(n - 1, -1, -1):
        if live[i]:
            for a in ir.ops[i].args():
                if isinstance(a, Val):
                    live[a.id] = True
    keep = [i for i in range(n) if live[i]]
    return rebuild(ir, keep, list(range(n))), n - len(keep)


def optimize(ir: KernelIR) -> tuple[KernelIR, PassStats]:
    """cse then dce (cse can leave ops that only removed duplicates read)."""
    n0 = len(ir.ops)
    if n0 == 0:
        return ir, PassStats(0, 0, 0, 0)
    out, c = cse(ir)
    out, d = dce(out)
    return out, PassStats(n0, len(out.ops), c, d)
