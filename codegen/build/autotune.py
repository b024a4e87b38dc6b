"""The fastest zero-spill chunking of a Q expression.

Hard constraint: no register spill on any target arch (ptxas report), where a Q kernel that stores
at most SPILL_SLACK_BYTES counts as not spilling (ptxas's own trade of a word for occupancy, see
there). Objective: a cost model of
the run time per row over the chunks' registers (-> occupancy), the number of chunks (launches) and
the scratch traffic between chunks. The search is seeded by an estimate from the IR's register
pressure and probes few chunk sizes; every probe compiles through the object cache, so the final
build reuses the winner's objects.

Cost model (per row, in units of one base-field multiplication; constants in `CostModel`):
    sum over chunks c of  weight(ops of c) / eff(occupancy(regs_c))
  + (scratch words loaded + stored) * WORD
  + chunks * CHUNK
  + launches per row * LAUNCH
weight = multiplications (3x3 = 6, 3x1 = 3, 1x1 = 1) + ADD per add/sub component.
eff(occ) = min(1, (occ / OCC_SAT) ** OCC_EXP): below OCC_SAT the SMs cannot hide the latency of
the long dependent multiply chains, so time grows as occupancy falls (less than 1 / occupancy: a
chunk's independent chains hide part of it).
launches per row: a single kernel is one launch over ROWS rows; a chunked plan launches every chunk
once per wave, and a wave is as many rows as the prover's scratch holds (SCRATCH_WORDS / slots,
at most ROWS; WAVE_BLOCKS blocks when the scratch is not known).
"""
from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Callable

from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.plan import Plan, plan

log = logging.getLogger("exps_codegen")

#: the Goldilocks prime (spec §1)
GL_P = (1 << 64) - (1 << 32) + 1
#: number literals a probe keeps as they are: the emitter renders a product by 1 as a copy and by
#: p - 1 as a negation (render_model.value_op), and 0 is the zero it subtracts from
_KEPT_LITERALS = (0, 1, GL_P - 1)


def _literal_class(v: int) -> tuple[int, int, int]:
    """(class, base, step) of the stand-ins a probe renders for a literal: what the 64-bit word's
    halves are (ptxas drops the partial products of a zero half, and the words >= p have a high
    half of all ones), so a stand-in costs the registers the literal does."""
    hi, lo = v >> 32, v & 0xFFFFFFFF
    if hi == 0:
        return 0, 0x9E3779B9, 1                     # a word below 2^32
    if hi == 0xFFFFFFFF:
        return 1, 0xFFFFFFFF_80000000, 1             # p and above (p - 1 is kept)
    if lo == 0:
        return 2, 0x7F4A7C15_00000000, 1 << 32       # a high half only
    return 3, 0x7F4A7C15_9E3779B9, 1                 # both halves


def probe_literals(q: KernelIR) -> KernelIR:
    """The IR a tuning probe compiles: every number literal but 0, 1 and p - 1 replaced by a
    stand-in of its class (`_literal_class`): the class's base plus the place of the value's first
    occurrence in Q (op index and operand), so equal literals stay equal and distinct ones distinct
    (the IR passes make of it what they make of the real one, CSE included), and an edit of one
    literal to a value that Q has nowhere else changes no stand-in. So a probe's text depends on the
    expression's shape, not on its constants: after such an edit its probes are object-cache hits
    and the tuner chooses what it chose, and a cold build of the edited key, tuning afresh, chooses
    the same."""
    stand_in: dict[int, int] = {}

    def arg(a, place: int):
        if not isinstance(a, Leaf) or a.kind != "number" or a.value in _KEPT_LITERALS:
            return a
        if a.value not in stand_in:
            _, base, step = _literal_class(a.value)
            stand_in[a.value] = base + step * place
        return dataclasses.replace(a, value=stand_in[a.value])
    ops = tuple(Op(op.arith, op.shape, arg(op.a, 2 * i), None if op.b is None else arg(op.b, 2 * i + 1), op.dim)
                for i, op in enumerate(q.ops))
    return KernelIR(q.exp_id, q.extended, ops)


FLOOR = 32          # smallest chunk tried; spilling there skips the AIR
#: Spill stores (bytes, per Q kernel and arch, ptxas report) that still count as no spill. ptxas
#: itself trades a word or two of spill for a register count that fits one more block per SM: the
#: single Q kernel of ../shared/pk's MultiRangeCheck2 (42 ops, 32 after the passes) is 80
#: registers, 3 blocks of 256 per SM, one word stored and reloaded per row (4 B; -maxrregcount
#: does not change it); the sample's Shared 128 registers, 8 B stored and reloaded. As one kernel
#: they run 1.21x and 1.03x faster on the H200 than cut into two chunk kernels, 1.71x and 1.09x at
#: the prover's scratch (the two builds timed in one run: `bench/run.py --before`). Above it a
#: spill rules the plan out.
SPILL_SLACK_BYTES = 8
MAX_REGS = 255
REG_BASE, REG_PER_OP = 32.0, 0.45
REGS_PER_SM = 65536
MAX_THREADS_PER_SM = 2048
BLOCK = 256


@dataclass(frozen=True)
class CostModel:
    """Calibrated on an H200 (tests/data/sweep-11waves-h200.json: 19 AIRs of >= 60 Q ops x up to 9
    chunkings x 11 wave sizes at 2^22 rows, 873 timings; `bench/fit_cost.py` refits it,
    tests/test_costmodel.py replays the tuner on it). Units: one base-field multiplication per row
    (1.83 ps on the H200 at full efficiency)."""

    ADD: float = 0.1           # a base-field add/sub, relative to a multiplication
    #: a scratch word stored or loaded: 8 B at the copy bandwidth (4,272 GB/s) is 1.87 ps, one
    #: multiplication's time. WORD 1.0 and CHUNK 2.0 rather than the least-squares fit's 0.41 and
    #: 0.21 (`bench/fit_cost.py` on sweep-11waves-h200.json): replaying the tuner on
    #: tests/data/sweep-2048-h200.json (with its register sampling), sweep-11waves-h200.json and
    #: sweep-3waves-h200.json, chosen / fastest 1.0066 / 1.0019 / 1.0007 on average (the fit's
    #: 1.0081 / 1.0019 / 1.0059; never worse on an AIR): fewer, larger chunks where they read and
    #: hand over less (SpecifiedRanges 2 chunks instead of 3, 1.03x); the same choices for CHUNK 2-4
    #: and WORD 0.8-1.0 (tests/test_costmodel.py)
    WORD: float = 1.0
    CHUNK: float = 2.0         # per-row cost of one more chunk kernel (prologue, addressing)
    OCC_SAT: float = 0.3125    # occupancy above which more resident threads stop helping
    #: below OCC_SAT time grows as (OCC_SAT / occ) ** OCC_EXP: a chunk of many independent chains
    #: hides latency with fewer threads than 1 / occ says. Replaying the tuner on
    #: tests/data/sweep-3waves-h200.json and sweep-11waves-h200.json, 0.6 chooses within a mean
    #: 1.006 / 1.002 of the fastest (1.0: 1.012 / 1.003, and RangeCheck4 cut in 2 chunks, 12% slower
    #: than its single kernel; tests/test_costmodel.py)
    OCC_EXP: float = 0.6
    LAUNCH: float = 2.27e6     # one kernel launch with its ramp and tail (4.2 us)
    ROWS: int = 1 << 22        # rows of the extended domain the model is evaluated at
    #: scratch words the prover gives exps_launch, when known; None: waves of WAVE_BLOCKS blocks.
    #: (The prover gives (nTmp1 + 3 (nTmp3 + 2)) x 256 x 512 words, its interpreter's temporaries:
    #: 16-20 words per row on ../shared/pk, 82 on the sample's Large. With a fixed guess of 19
    #: words the tuner cuts the sample's Large in 22 chunks of up to 255 registers, 0.83x as fast
    #: on the H200: `bench/run.py --before` on the two builds.)
    SCRATCH_WORDS: int | None = None
    WAVE_BLOCKS: int = 512     # the wave when the scratch is not known (the prover's, at slots <= its temporaries)


#: base-field multiplications of an op (3x3 extension multiply = 6, 3x1 = 3, as the anchors)
MULS = {("mul", "33"): 6, ("mul", "31"): 3, ("mul", "11"): 1}


def op_weight(op, m: "CostModel") -> float:
    if op.arith == "mul":
        return MULS[(op.arith, op.shape)]
    if op.arith == "copy":
        return 0.0
    comps = 3 if op.shape == "33" else (3 if (op.shape == "31" and op.arith == "sub_swap") else 1)
    return m.ADD * comps


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


def estimated_regs(ir: KernelIR, pl: Plan) -> list[int]:
    """Per chunk of `pl`, the registers estimated from the IR (live words and ops)."""
    return [estimate_regs(w, e - s) for w, (s, e) in zip(chunk_pressure(ir, pl), pl.chunks)]


def scratch_words(ir: KernelIR, pl: Plan) -> int:
    loads = sum(ir.ops[v].dim for ch in pl.loads for v in ch)
    stores = sum(ir.ops[v].dim for ch in pl.stores for v in ch)
    return loads + stores


def wave_rows(pl: Plan, m: CostModel = CostModel()) -> int:
    """Rows per wave of a chunked plan under the prover's scratch (templates/exps_runtime.cpp): as many
    256-row blocks as SCRATCH_WORDS holds at the plan's slots, at least one, at most ROWS."""
    if pl.total_slots == 0:
        return m.ROWS
    if m.SCRATCH_WORDS is None:
        return min(m.ROWS, m.WAVE_BLOCKS * 256)
    blocks = max(1, m.SCRATCH_WORDS // (pl.total_slots * 256))
    return min(m.ROWS, blocks * 256)


def launches_per_row(pl: Plan, m: CostModel = CostModel()) -> float:
    if pl.n_chunks == 1:
        return 1.0 / m.ROWS
    return pl.n_chunks * math.ceil(m.ROWS / wave_rows(pl, m)) / m.ROWS


def cost(ir: KernelIR, pl: Plan, regs: list[int], m: CostModel = CostModel()) -> float:
    """Modelled time per row of a chunking with the given per-chunk registers."""
    t = 0.0
    for (s, e), r in zip(pl.chunks, regs):
        occ = occupancy(r)
        eff = min(1.0, (occ / m.OCC_SAT) ** m.OCC_EXP) if occ > 0 else 1e-9
        t += sum(op_weight(ir.ops[i], m) for i in range(s, e)) / eff
    return (t + scratch_words(ir, pl) * m.WORD + pl.n_chunks * m.CHUNK
            + launches_per_row(pl, m) * m.LAUNCH)


@dataclass
class Probe:
    ops_per_chunk: int
    n_chunks: int
    slots: int
    regs: list[int]
    spills: int
    cost: float
    estimated: bool = False
    #: the kernel compiled as `__launch_bounds__(256, min_blocks)` (0: no bound; bound_single)
    min_blocks: int = 0


@dataclass
class TuneResult:
    ops_per_chunk: int = 0
    skip: str = ""
    #: the single kernel's `__launch_bounds__(256, min_blocks)` (0: none; bound_single)
    min_blocks: int = 0
    probes: list[Probe] = field(default_factory=list)
    how: str = "probed"          # probed | fixed (chunk given) | estimated (no nvcc)
    arch: int | None = None      # the one arch the probes compiled for

    def to_json(self) -> dict:
        """Strict JSON: a spilling probe's cost (infinite) is written as null."""
        def probe(p: Probe) -> dict:
            d = dict(p.__dict__)
            d["cost"] = d["cost"] if math.isfinite(d["cost"]) else None
            return d
        return {"ops_per_chunk": self.ops_per_chunk, "min_blocks": self.min_blocks,
                "skip": self.skip, "how": self.how,
                "arch": self.arch, "probes": [probe(p) for p in self.probes]}


#: the arch autotune probes compile for when a build targets several: the H100/H200 (the GPUs
#: the cost model was calibrated on) when present, else the newest
TUNE_ARCH = 90


def tune_arch(archs: list[int]) -> int:
    return TUNE_ARCH if TUNE_ARCH in archs else max(archs)


#: compile the plan's TUs, return per-chunk (registers, spill bytes) over all archs
Compiler = Callable[[Plan], tuple[list[int], int]]


#: a Q of more ops than this is never tried as one kernel: nvcc's time on one straight-line
#: function grows faster than linearly (a 100,000-op kernel kept cicc busy for minutes), and such a
#: kernel would spill anyway; chunks keep the build linear in ops
MAX_SINGLE_OPS = 4096


def candidates(n: int) -> list[int]:
    sizes = [c for c in (2048, 1024, 768, 512, 384, 256, 192, 128, 96, 64, 48, FLOOR) if c < n]
    return ([0] if n <= MAX_SINGLE_OPS or not sizes else []) + sizes


def estimate(ir: KernelIR, opc: int, m: CostModel = CostModel()) -> Probe:
    pl = plan(ir, opc)
    regs = estimated_regs(ir, pl)
    over = max(regs) > MAX_REGS
    return Probe(opc, pl.n_chunks, pl.total_slots, regs, 0,
                 math.inf if over else cost(ir, pl, regs, m), estimated=True)


def estimated_choice(ir: KernelIR, slots_cap: int = 1 << 20, m: CostModel = CostModel()) -> TuneResult:
    """The chunking the cost model predicts fastest from the IR's register pressure alone (no
    compile): what `emit` uses when there is no nvcc to probe with."""
    res = TuneResult(how="estimated")
    probes = [estimate(ir, c, m) for c in candidates(len(ir.ops))]
    ok = [p for p in probes if p.slots <= slots_cap and math.isfinite(p.cost)]
    if not ok:
        ok = [p for p in probes if p.slots <= slots_cap]
    if not ok:
        res.skip = f"every chunking needs more than SLOTS_CAP {slots_cap} scratch slots"
        return res
    best = min(ok, key=lambda p: (p.cost, p.ops_per_chunk))
    res.ops_per_chunk = best.ops_per_chunk
    res.probes = [best]
    return res


MAX_PROBES = 6


def candidate_plans(ir: KernelIR, slots_cap: int = 1 << 20) -> tuple[dict[int, Plan], list[int]]:
    """The plans tune() chooses from ({ops per chunk: plan} within `slots_cap`) and, largest first,
    the chunk sizes left out because they need more scratch slots than that."""
    plans = {c: plan(ir, c) for c in candidates(len(ir.ops))}
    over_cap = sorted((c for c, pl in plans.items() if pl.total_slots > slots_cap), reverse=True)
    return {c: pl for c, pl in plans.items() if pl.total_slots <= slots_cap}, over_cap


def floor_cost(ir: KernelIR, pl: Plan, m: CostModel = CostModel()) -> float:
    """A lower bound of a plan's cost at any registers: its cost at full occupancy."""
    return cost(ir, pl, [1] * pl.n_chunks, m)


#: A plan is not compiled when even at full occupancy (`floor_cost`) it could not beat the best
#: measured cost by more than this fraction: what it might still gain is below what the cost model
#: resolves. Replaying the tuner on the four recorded H200 sweeps in tests/data/ (every chunking
#: of every AIR of >= 60 Q ops timed, with every chunk's registers), 0.05 makes every choice the
#: exact search (0) makes, from 4-14% fewer probes (Intermediates, the sample's Large and Shared
#: one fewer each); from 0.06 SpecifiedRanges is taken at 96 ops per chunk or as one kernel
#: instead of 128-192 on all four (1.03x-1.85x slower; tests/test_autotune.py). On the sample and
#: ../shared/pk every choice is the exact search's (the same sources), from 8 probes fewer: cold
#: build CPU -16% and -5-10% (docs/BENCHMARKS.md, "Build cost").
PRUNE_MARGIN = 0.05


def cannot_win(ir: KernelIR, pl: Plan, best: float, margin: float = PRUNE_MARGIN,
               m: CostModel = CostModel()) -> bool:
    """Whether plan `pl` could not beat cost `best` by more than `margin` (a fraction) at any
    registers: its `floor_cost` is at least (1 - margin) * best."""
    return floor_cost(ir, pl, m) >= (1.0 - margin) * best


#: a Q of fewer ops than this is one kernel unless that spills: cut in two chunks by the cost model,
#: Tiny (39 ops) runs 0.78x and Lookup3 (40) 0.94x as fast as one kernel on the H200 (value path;
#: `bench/run.py --before` on the two builds)
SINGLE_ONLY_BELOW = 2 * FLOOR


def first_probe(ir: KernelIR, plans: dict[int, Plan], m: CostModel = CostModel(),
                margin: float = PRUNE_MARGIN) -> tuple[int, bool]:
    """The candidate tune() compiles first (the best estimate; when every estimate spills, the
    smallest chunks) and whether the estimate expects it to end the search: every other candidate
    `cannot_win` against its estimated cost (measured as estimated, it leaves nothing to probe).
    A build then compiles that first probe as its final object (actions.act_tune)."""
    n = len(ir.ops)
    if n < SINGLE_ONLY_BELOW and 0 in plans:
        return 0, True
    est = {c: (math.inf if max(r) > MAX_REGS else cost(ir, pl, r, m))
           for c, pl in plans.items() for r in [estimated_regs(ir, pl)]}
    first = min(plans, key=lambda c: (est[c], c or n))
    sure = math.isfinite(est[first]) and all(cannot_win(ir, pl, est[first], margin, m)
                                             for c, pl in plans.items() if c != first)
    return first, sure


def tune(ir: KernelIR, compile_plan: Compiler, slots_cap: int = 1 << 20, max_probes: int = MAX_PROBES,
         m: CostModel = CostModel(), margin: float = PRUNE_MARGIN,
         compile_bounded: Callable[[int], tuple[list[int], int]] | None = None) -> TuneResult:
    """Search for the cheapest no-spill chunking with few compiles.

    Every candidate is first estimated from the IR's register pressure. After each probe the
    estimates of the untried candidates are rescaled by the measured/estimated register ratio of
    the nearest probed chunk size (nvcc hoists loads, so the IR's live count is a lower bound that
    grows less than the truth with chunk size). The next probe is the candidate with the lowest
    predicted cost; the search stops when no untried candidate is predicted to beat the best
    measured one, or after `max_probes` compiles.

    The search also stops as soon as no untried candidate could beat the best measured one by more
    than `margin` even at full occupancy (`cannot_win`: `floor_cost` is a lower bound of a plan's
    cost at any registers): with margin 0 whatever the search would still compile could not
    change its choice (a small Q's single kernel usually leaves every chunked plan
    behind by more than their extra launch cost, so its tune is one compile); PRUNE_MARGIN also
    drops plans that could gain less than the model resolves. For the same reason such a neighbour
    of the best plan is not compiled; it counts against `max_probes` as if it had been, so the
    search never goes further than one that compiles it (replayed on three of the H200 sweeps in
    tests/data/: the same choices from 10-15% fewer probes; with PRUNE_MARGIN the same choices on
    all four from 4-14% fewer again, tests/test_autotune.py). Probes run one at a time, the
    neighbour predicted cheaper first (compiling both neighbours at once costs a probe wherever the
    first one wins; nvcc's CPU is what a build pays, and other kernels' tasks fill the cores).

    With `compile_bounded` (`bound_single`'s compiler), a single kernel whose probe spills at
    BOUND_FROM_REGS registers or more is compiled bounded to BOUND_BLOCKS blocks per SM at once, not
    after the search: when that does not spill it is a candidate like any plan, so the chunked plans
    it leaves behind are not compiled (../shared/pk's six 96-op lookups and permutations spill
    24 B unbounded and run bounded at a cost of 205 against floors of 247-285 for every chunking:
    no chunked plan of theirs is probed). `bound_single` would compile it in the same cases, so
    this adds no compile.
    """
    n = len(ir.ops)
    res = TuneResult()
    plans, over_cap = candidate_plans(ir, slots_cap)
    if not plans:
        res.skip = f"every chunking needs more than SLOTS_CAP {slots_cap} scratch slots"
        return res
    est = {c: estimated_regs(ir, pl) for c, pl in plans.items()}
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
    by_size = sorted(plans, key=lambda c: size[c])     # small chunks first, single kernel last
    beaten: set[int] = set()       # neighbours not compiled: their floor_cost is no less than the best's cost

    def probe(c: int) -> Probe:
        p = record(c, *compile_plan(plans[c]))
        if c == 0 and p.spills and max(p.regs) >= BOUND_FROM_REGS and compile_bounded is not None:
            b = bounded_probe(ir, compile_bounded, m)
            res.probes.append(b)
            log.info("autotune: single kernel bounded to %d blocks per SM -> regs max %d, spill %d B",
                     BOUND_BLOCKS, max(b.regs), b.spills)
            if not b.spills:
                return b
        return p

    def record(c: int, regs: list[int], spills: int) -> Probe:
        pl = plans[c]
        p = Probe(c, pl.n_chunks, pl.total_slots, regs, spills,
                  math.inf if spills else cost(ir, pl, regs, m))
        measured[c] = p
        res.probes.append(p)
        log.info("autotune: chunk %s -> %d chunks, regs max %d, spill %d B, cost %.0f",
                 c or "single", pl.n_chunks, max(regs), spills, p.cost)
        return p

    # 1. the best estimate; 2. hill-climb over neighbouring sizes until a measured local optimum;
    # 3. any untried size the rescaled estimates still predict clearly better.
    # the best prediction; when every one is infinite (all estimated to spill), the smallest chunks
    p = probe(first_probe(ir, plans, m)[0])
    best = None if p.spills else p
    if best is not None and n < SINGLE_ONLY_BELOW and best.ops_per_chunk == 0:
        log.info("autotune: %d ops, the single kernel does not spill: one kernel", n)
        res.ops_per_chunk, res.min_blocks = 0, best.min_blocks
        return res
    while len(measured) + len(beaten) < max_probes:
        if best is not None and all(cannot_win(ir, pl, best.cost, margin, m) for c, pl in plans.items() if c not in measured):
            log.info("autotune: no untried chunking beats %.0f by more than %g%% even at full occupancy", best.cost,
                     100 * margin)
            break
        centre = best.ops_per_chunk if best else min(measured, key=lambda x: size[x])
        i = by_size.index(centre)
        ways = []       # per direction: (its untried neighbour, the sizes passed over, the size to compile)
        for step in (-1, 1):
            # the nearest untried size each way; one that cannot beat the best even at full
            # occupancy is not compiled: it counts as probed and losing (the budget included), which
            # is what its probe would have shown. One that could gain at most the margin is not
            # compiled either, but the search looks past it: its probe might have won and moved the
            # search on (margin 0 is the exact search)
            j, passed, cand = i + step, [], None
            while 0 <= j < len(by_size) and by_size[j] not in measured and by_size[j] not in beaten:
                c = by_size[j]
                if best is None or not cannot_win(ir, plans[c], best.cost, margin, m):
                    cand = c
                    break
                if cannot_win(ir, plans[c], best.cost, 0.0, m):
                    if j == i + step:      # (past a neighbour: the exact search would not get there)
                        passed.append(c)
                    break
                passed.append(c)
                j += step
            if 0 <= i + step < len(by_size) and (passed or cand is not None):
                ways.append((by_size[i + step], passed, cand))
        # one probe at a time, the direction whose neighbour is predicted cheaper first: when its
        # probe beats the best the search moves on from there, and the other neighbour (a unimodal
        # cost puts it above the old best) is not compiled unless step 3 predicts it clearly better.
        # Its sizes passed over count as probed only when the search gets to them, as a search
        # that compiled them would (replayed on the five recorded sweeps in tests/data/: the same
        # choices as both neighbours at once, from 1-2 probes fewer on Intermediates, Large and the
        # 3,000-op Q)
        nxt = None
        for _, passed, cand in sorted(ways, key=lambda w: (predict(w[0]), w[0])):
            beaten.update(passed)
            if cand is not None:
                nxt = cand
                break
        if best is None:   # everything so far spilled: only smaller chunks can help
            smaller = [c for c in by_size[:i] if c not in measured]
            nxt = smaller[-1] if smaller else None
        if nxt is None:
            pred = {c: predict(c) for c in plans if c not in measured and c not in beaten}
            c = min(pred, key=lambda x: (pred[x], x), default=None)
            if c is None or best is None or pred[c] >= 0.9 * best.cost:
                break
            nxt = c
        if len(measured) + len(beaten) >= max_probes:
            break
        p = probe(nxt)
        if not p.spills and (best is None or p.cost < best.cost):
            best = p
    if best is None:   # out of probes and everything spilled: walk down to the floor
        smallest = min(size[x] for x in measured)
        for c in sorted((x for x in plans if size[x] < smallest), key=lambda x: -size[x]):
            if not probe(c).spills:
                best = measured[c]
                break
    if best is None:
        res.skip = f"still spills at the smallest chunk tried ({min(size[x] for x in measured)} ops)"
        if over_cap:
            res.skip += (f"; chunks of {', '.join(map(str, over_cap))} ops would need more than "
                         f"SLOTS_CAP {slots_cap} scratch slots")
        return res
    res.ops_per_chunk, res.min_blocks = best.ops_per_chunk, best.min_blocks
    return res


#: A single Q kernel of more than BOUND_FROM_REGS registers (2 blocks of 256 per SM), or of
#: BOUND_FROM_REGS with ptxas's own spill of a word or two (3 blocks, SPILL_SLACK_BYTES), is
#: compiled again as `__launch_bounds__(256, BOUND_BLOCKS)` (at most 80 registers) and runs so when
#: that does not spill. H200, every single kernel of ../shared/pk and the sample of >= 80 registers,
#: bounded vs not, same run (docs/BENCHMARKS.md, "Levers tried and rejected"): MultiRangeCheck1
#: 100 -> 80 registers 1.08x, MultiRangeCheck2 80 with 4 B spilled -> 80 with none 1.07x,
#: RangeCheckMix 96 -> 80 1.02x; RangeCheck4 (104), Shared (128) and the 96-op lookups /
#: permutations (80, none spilled) spill when bounded and keep their kernel. At 80 registers with
#: no spill the bound gains nothing (Connection1, Air2, Air3, Module, Lookup2_12, Lookup3,
#: RangeCheck1 1.00x; Lookup1, RangeCheck2 0.99x, SimpleLeft 0.98x: ptxas's 79-register form),
#: below it the bound only costs (ptxas then takes up to 80 registers where it takes 48 unbounded:
#: Tiny 0.96x). A single kernel that spills more than the slack at >= 80 registers (ptxas fitting
#: 3 blocks by itself) is tried bounded too: a MultiRangeCheck2 that stores 28 B unbounded, cut in
#: two chunks, runs 0.80x as fast as its bounded single kernel, which spills nothing.
BOUND_BLOCKS = 3
BOUND_FROM_REGS = 80
#: the most blocks of BLOCK threads an SM holds: the largest bound a tune.json may name
MAX_MIN_BLOCKS = MAX_THREADS_PER_SM // BLOCK


def bounded_probe(ir: KernelIR, compile_bounded: Callable[[int], tuple[list[int], int]],
                  m: CostModel = CostModel()) -> Probe:
    """The single kernel compiled bounded to BOUND_BLOCKS blocks per SM (`compile_bounded`), as a
    probe: tune's, as soon as the unbounded one spills, and bound_single's."""
    got, spills = compile_bounded(BOUND_BLOCKS)
    return Probe(0, 1, 0, got, spills, math.inf if spills else cost(ir, plan(ir, 0), got, m),
                 min_blocks=BOUND_BLOCKS)


def bound_single(ir: KernelIR, res: TuneResult, compile_bounded: Callable[[int], tuple[list[int], int]],
                 slack_bytes: int = 0, m: CostModel = CostModel()) -> Probe | None:
    """Try the single kernel bounded to BOUND_BLOCKS blocks per SM (`compile_bounded(BOUND_BLOCKS)`:
    registers and spill bytes, as a probe) when its measured unbounded probe
    - was chosen, with more than BOUND_FROM_REGS registers, or that many and `slack_bytes` > 0
      (its spill stores within the slack): the bound is taken when it does not spill;
    - or spilled at BOUND_FROM_REGS or more (ptxas fitting 3 blocks by itself) and a chunked plan
      was chosen: the bounded kernel, when it does not spill, replaces that plan where a Q that
      small is one kernel anyway (SINGLE_ONLY_BELOW) or where the cost model ranks it first.
    Returns the bounded probe (also appended to `res.probes`), or None when there was nothing to
    try, or when it was tried already (a tune given `compile_bounded` compiles the second case's
    bounded kernel as soon as the single kernel's probe spills)."""
    if res.skip or any(p.min_blocks for p in res.probes):
        return None
    single = [p for p in res.probes if p.ops_per_chunk == 0 and not p.estimated and not p.min_blocks]
    if not single:
        return None
    regs = max(single[-1].regs)
    if res.ops_per_chunk == 0:
        if single[-1].spills or regs < BOUND_FROM_REGS or (regs == BOUND_FROM_REGS and not slack_bytes):
            return None
    elif not single[-1].spills or regs < BOUND_FROM_REGS:
        return None
    p = bounded_probe(ir, compile_bounded, m)
    res.probes.append(p)
    chosen = min((q.cost for q in res.probes if q.ops_per_chunk == res.ops_per_chunk and not q.min_blocks
                  and not q.estimated), default=math.inf)
    take = not p.spills and (res.ops_per_chunk == 0 or len(ir.ops) < SINGLE_ONLY_BELOW or p.cost < chosen)
    log.info("autotune: single kernel bounded to %d blocks per SM -> regs max %d, spill %d B%s",
             BOUND_BLOCKS, max(p.regs), p.spills, ": taken" if take else "")
    if take:
        res.ops_per_chunk, res.min_blocks = 0, BOUND_BLOCKS
    return p
