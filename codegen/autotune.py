"""The fastest zero-spill chunking of a Q expression (issue #3).

Hard constraint: no register spill on any target arch (ptxas report). Objective: a cost model of
the run time per row over the chunks' registers (-> occupancy), the number of chunks (launches) and
the scratch traffic between chunks. The search is seeded by an estimate from the IR's register
pressure and probes few chunk sizes; every probe compiles through the object cache, so the final
build reuses the winner's objects.

Cost model (per row, arbitrary units = picoseconds on an H200; constants in `CostModel`):
    sum over chunks c of  ops_c * OP / eff(occupancy(regs_c))
  + (scratch words loaded + stored) * WORD
  + chunks * LAUNCH / rows_per_wave
eff(occ) = min(1, occ / OCC_SAT): below OCC_SAT the SMs cannot hide the latency of the long
dependent multiply chains, so time grows as 1 / occupancy (anchors-h200.md: 255 registers at 12.5%
occupancy ran 2.85x slower than 72-80 registers at 37.5%).
"""
from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .ir import KernelIR, Val
from .plan import Plan, plan

log = logging.getLogger("exps_codegen")

FLOOR = 32          # smallest chunk tried; spilling there skips the AIR
MAX_REGS = 255
REG_BASE, REG_PER_OP = 32.0, 0.45
REGS_PER_SM = 65536
MAX_THREADS_PER_SM = 2048
BLOCK = 256


@dataclass(frozen=True)
class CostModel:
    OP: float = 5.0            # ps per op-row at full efficiency
    WORD: float = 4.0          # ps per scratch word moved (load or store) per row
    LAUNCH: float = 4.0e6      # ps per kernel launch
    ROWS_PER_WAVE: int = 512 * 256
    OCC_SAT: float = 0.5


def occupancy(regs: int, block: int = BLOCK) -> float:
    """Fraction of an SM's 2048 thread slots resident at `regs` registers per thread."""
    per_thread = max(8, math.ceil(max(regs, 1) / 8) * 8)
    blocks = min(REGS_PER_SM // (per_thread * block), MAX_THREADS_PER_SM // block)
    return blocks * block / MAX_THREADS_PER_SM


def chunk_pressure(ir: KernelIR, pl: Plan) -> list[int]:
    """Per chunk, the largest number of 64-bit words live at once. A value is live from its
    definition (or, for a value loaded from scratch, its first use) to its last use in the chunk;
    values stored for later chunks are stored right after their definition."""
    out = []
    for s, e in pl.chunks:
        first: dict[int, int] = {}
        lastu: dict[int, int] = {}
        for i in range(s, e):
            for a in ir.ops[i].args():
                if isinstance(a, Val):
                    first.setdefault(a.id, i)
                    lastu[a.id] = i
            first.setdefault(i, i)
            lastu.setdefault(i, i)
        delta = [0] * (e - s + 1)
        for v, f in first.items():
            d = ir.ops[v].dim
            delta[f - s] += d
            delta[lastu[v] - s + 1] -= d
        live = best = 0
        for x in delta:
            live += x
            best = max(best, live)
        out.append(best)
    return out


def estimate_regs(words: int, ops: int = 0) -> int:
    """Registers of a chunk: at least 2 per live 64-bit word plus addressing; nvcc hoists loads
    and interleaves independent chains, so in practice registers grow with the chunk's op count
    (fit on the anchors of anchors-h200.md: 16 ops ~40, 64 ~72-80, 138 ~96, 218 ~126 registers)."""
    return min(MAX_REGS + 1, max(2 * words + 24, round(REG_BASE + REG_PER_OP * ops)))


def scratch_words(ir: KernelIR, pl: Plan) -> int:
    loads = sum(ir.ops[v].dim for ch in pl.loads for v in ch)
    stores = sum(ir.ops[v].dim for ch in pl.stores for v in ch)
    return loads + stores


def cost(ir: KernelIR, pl: Plan, regs: list[int], m: CostModel = CostModel()) -> float:
    t = 0.0
    for (s, e), r in zip(pl.chunks, regs):
        occ = occupancy(r)
        eff = min(1.0, occ / m.OCC_SAT) if occ > 0 else 1e-9
        t += (e - s) * m.OP / eff
    t += scratch_words(ir, pl) * m.WORD
    t += pl.n_chunks * m.LAUNCH / m.ROWS_PER_WAVE
    return t


@dataclass
class Probe:
    ops_per_chunk: int
    n_chunks: int
    slots: int
    regs: list[int]
    spills: int
    cost: float
    estimated: bool = False


@dataclass
class TuneResult:
    ops_per_chunk: int = 0
    skip: str = ""
    probes: list[Probe] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"ops_per_chunk": self.ops_per_chunk, "skip": self.skip,
                "probes": [p.__dict__ for p in self.probes]}


#: compile the plan's TUs, return per-chunk (registers, spill bytes) over all archs
Compiler = Callable[[Plan], tuple[list[int], int]]


def candidates(n: int) -> list[int]:
    sizes = [0] + [c for c in (2048, 1024, 768, 512, 384, 256, 192, 128, 96, 64, 48, FLOOR) if c < n]
    return sizes


def estimate(ir: KernelIR, opc: int, m: CostModel = CostModel()) -> Probe:
    pl = plan(ir, opc)
    regs = [estimate_regs(w, e - s) for w, (s, e) in zip(chunk_pressure(ir, pl), pl.chunks)]
    return Probe(opc, pl.n_chunks, pl.total_slots, regs, 0, cost(ir, pl, regs, m), estimated=True)


def tune(ir: KernelIR, compile_plan: Compiler, slots_cap: int = 1000, max_probes: int = 6,
         m: CostModel = CostModel()) -> TuneResult:
    """Search for the cheapest no-spill chunking with few compiles.

    Every candidate is first estimated from the IR's register pressure. After each probe the
    estimates of the untried candidates are rescaled by the measured/estimated register ratio of
    the nearest probed chunk size (nvcc hoists loads, so the IR's live count is a lower bound that
    grows less than the truth with chunk size). The next probe is the candidate with the lowest
    predicted cost; the search stops when no untried candidate is predicted to beat the best
    measured one, or after `max_probes` compiles.
    """
    n = len(ir.ops)
    res = TuneResult()
    plans = {c: plan(ir, c) for c in candidates(n)}
    plans = {c: pl for c, pl in plans.items() if pl.total_slots <= slots_cap}
    if not plans:
        res.skip = f"every chunking needs more than SLOTS_CAP {slots_cap} scratch slots"
        return res
    est = {c: [estimate_regs(w, e - s) for w, (s, e) in zip(chunk_pressure(ir, pl), pl.chunks)]
           for c, pl in plans.items()}
    size = {c: (c or n) for c in plans}
    measured: dict[int, Probe] = {}

    def predict(c: int) -> float:
        if not measured:
            regs = est[c]
        else:
            near = min(measured, key=lambda x: (abs(math.log(size[x] / size[c])), x))
            k = max(measured[near].regs) / max(est[near])
            regs = [min(MAX_REGS + 1, round(r * k)) for r in est[c]]
        if max(regs) > MAX_REGS:
            return math.inf
        return cost(ir, plans[c], regs, m)

    best: Probe | None = None
    while len(measured) < max_probes:
        untried = [c for c in plans if c not in measured
                   and not (best is None and any(p.spills and size[c] >= size[x] for x, p in measured.items()))]
        if not untried:
            break
        pred = {c: predict(c) for c in untried}
        c = min(untried, key=lambda x: (pred[x], x))
        if best is not None and pred[c] >= best.cost:
            break
        pl = plans[c]
        regs, spills = compile_plan(pl)
        p = Probe(c, pl.n_chunks, pl.total_slots, regs, spills,
                  math.inf if spills else cost(ir, pl, regs, m))
        measured[c] = p
        res.probes.append(p)
        log.info("autotune: chunk %s -> %d chunks, regs max %d, spill %d B, cost %.0f",
                 c or "single", pl.n_chunks, max(regs), spills, p.cost)
        if not spills and (best is None or p.cost < best.cost):
            best = p
    if best is None:
        for c in sorted((x for x in plans if x not in measured and x != 0), key=lambda x: -x):
            if any(p.spills and size[c] >= size[x] for x, p in measured.items()) and c != FLOOR:
                continue
            pl = plans[c]
            regs, spills = compile_plan(pl)
            p = Probe(c, pl.n_chunks, pl.total_slots, regs, spills,
                      math.inf if spills else cost(ir, pl, regs, m))
            res.probes.append(p)
            measured[c] = p
            if not spills:
                best = p
                break
    if best is None:
        res.skip = f"still spills at the smallest chunk ({min(size.values())} ops)"
        return res
    res.ops_per_chunk = best.ops_per_chunk
    return res


def halving_from_512(ir: KernelIR, compile_plan: Compiler) -> TuneResult:
    """The original tool's search (for benchmarks): chunk 512, halve on every spill down to 64."""
    res = TuneResult()
    c = 512
    while c >= 64:
        opc = 0 if c >= len(ir.ops) else c
        pl = plan(ir, opc)
        regs, spills = compile_plan(pl)
        res.probes.append(Probe(opc, pl.n_chunks, pl.total_slots, regs, spills, 0.0))
        if not spills:
            res.ops_per_chunk = opc
            return res
        c //= 2
    res.skip = "still spills at CHUNK_MIN 64"
    return res
