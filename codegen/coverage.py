"""One AIR -> what its kernel covers: the Q IR, the covered trace-domain expressions, and the skips.

This is where the per-AIR and per-expression refusal rules of spec §6 live (with our additions:
Zi boundaries, non-SSA code and bad input skip the AIR with a reason instead of aborting the run).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from codegen.ir import KernelIR, Resolver, Skip, lower
from codegen.model import ExpressionsInfo, StarkInfo, show, printable

log = logging.getLogger("exps_codegen")

CAP = None         # no limit on Q ops (chunking builds any Q); a number: skip AIRs above it (cap= / --cap)
EXPR_CAP = 512     # trace-domain expressions above this: not covered
#: scratch slots above this: the AIR is skipped. Not a limit in practice (the original's 1000 stops
#: large Qs): the prover itself falls back to the interpreter when exps_min_scratch() exceeds the
#: scratch it has (spec §5), so a kernel that needs more can never write out of bounds
SLOTS_CAP = 1 << 20


@dataclass(frozen=True)
class ExprKernel:
    """A covered trace-domain expression: its IR, whether it is the denominator of a dim-1
    numerator (spec §4.3: MUL_INV then computes `u_i * dest0`), and whether a hint inverts it
    (`inv`: the denominator of a hint pair, the only params the prover launches with MUL_INV /
    WRITE_INV). An expression no hint inverts gets no inverse kernel of its own: a call in an
    inverse mode runs its WRITE kernel into scratch and the key's generic inverse kernel over that
    (the words are the same; it is slower, and the prover is not expected to make it)."""

    ir: KernelIR
    num1: bool
    inv: bool = True


@dataclass
class Coverage:
    si: StarkInfo
    q: KernelIR | None = None
    exprs: list[ExprKernel] = field(default_factory=list)
    skipped_exprs: list[Skip] = field(default_factory=list)
    air_skip: str = ""          # non-empty: the whole AIR gets no .so

    @property
    def q_ops(self) -> int:
        return len(self.q.ops) if self.q else 0


def numerator_dims(ei: ExpressionsInfo, dims: dict[int, int]) -> dict[int, set[int]]:
    """denominator expId -> dims of the tmp numerators it is paired with in hintsInfo (§4.3)."""
    out: dict[int, set[int]] = {}
    for h in ei.hints:
        nop, nid, ndim = h.numerator
        dop, did, _ = h.denominator
        if dop == "tmp" and nop == "tmp":
            out.setdefault(did, set()).add(dims.get(nid, ndim))
    return out


def cover(si: StarkInfo, ei: ExpressionsInfo, cap: int | None = CAP, expr_cap: int = EXPR_CAP) -> Coverage:
    cov = Coverage(si)
    exprs = ei.by_id()
    if si.cexp_id not in exprs:
        cov.air_skip = f"{printable(ei.file)}: cExpId {si.cexp_id} is not in expressionsCode"
        return cov
    if si.boundaries[:1] != ("everyRow",) or len(si.boundaries) > 1:
        cov.air_skip = (f"{printable(si.file)}: boundaries {show(list(si.boundaries), 120)}: the GPU prover computes "
                        "only the everyRow zerofier")     # (names are JSON text: shown bounded)
        return cov
    qe = exprs[si.cexp_id]
    if cap is not None and len(qe.code) > cap:
        cov.air_skip = f"Q has {len(qe.code)} ops > cap {cap} (the cap= / --cap limit)"
        return cov
    res = Resolver(si)
    q = lower(si, qe, extended=True, resolver=res)
    if isinstance(q, Skip):
        cov.air_skip = f"{printable(ei.file)}: Q: {q.reason}"
        return cov
    if qe.code[-1].dest.type != "q":
        cov.air_skip = f"{printable(ei.file)}: expressionsCode[{qe.index}]: Q's last op does not write q"
        return cov
    cov.q = q
    lowered: dict[int, KernelIR] = {}
    for e in ei.expressions:
        if e.exp_id == si.cexp_id:
            continue
        if not e.code:
            cov.skipped_exprs.append(Skip(e.exp_id, "empty"))
            continue
        if len(e.code) > expr_cap:
            cov.skipped_exprs.append(Skip(e.exp_id, f"{len(e.code)} ops > EXPR_CAP {expr_cap}"))
            continue
        r = lower(si, e, extended=False, resolver=res)
        if isinstance(r, Skip):
            cov.skipped_exprs.append(r)
            continue
        lowered[e.exp_id] = r
    # a numerator's dim is its expression's bin destDim (the last step's dest), covered or not
    num = numerator_dims(ei, {e.exp_id: e.code[-1].dest.dim for e in ei.expressions if e.code})
    inverted = {h.denominator[1] for h in ei.hints if h.denominator[0] == "tmp"}
    for exp_id, r in lowered.items():
        dims = num.get(exp_id, set())
        if r.out_dim == 3 and dims == {1, 3}:
            cov.skipped_exprs.append(Skip(exp_id, "denominator of numerators of both dims 1 and 3"))
            continue
        cov.exprs.append(ExprKernel(r, num1=(r.out_dim == 3 and dims == {1}), inv=exp_id in inverted))
    return cov


def coverage_to_json(cov: Coverage) -> dict:
    from codegen.ir import ir_to_json
    return {
        "air_skip": cov.air_skip,
        "q": ir_to_json(cov.q) if cov.q else None,
        "exprs": [{"ir": ir_to_json(x.ir), "num1": x.num1, "inv": x.inv} for x in cov.exprs],
        "skipped_exprs": [[s.exp_id, s.reason] for s in cov.skipped_exprs],
    }


def coverage_from_json(si: StarkInfo, d: dict) -> Coverage:
    from codegen.ir import ir_from_json
    cov = Coverage(si, air_skip=d["air_skip"])
    cov.q = ir_from_json(d["q"]) if d["q"] else None
    cov.exprs = [ExprKernel(ir_from_json(x["ir"]), bool(x["num1"]), bool(x.get("inv", True))) for x in d["exprs"]]
    cov.skipped_exprs = [Skip(int(a), str(b)) for a, b in d["skipped_exprs"]]
    return cov
