"""The tune's probes: the chunk kernels of a candidate plan compiled on the tune arch and their
ptxas reports turned into the registers and spills the cost model reads (`Prober`, the search
state of one kernel's tune; the search itself is autotune.tune). A probe of a large plan compiles
`representatives` of its chunks and `fill_unprobed` hands their registers out to the rest; a probe
of chunks compiles stand-ins for the literals (`autotune.probe_literals`), so that its registers
and the choice are the shape's.
"""
from __future__ import annotations

import logging
from pathlib import Path

from codegen.build import prelude, toolchain
from codegen.build.autotune import (MAX_PROBES, SPILL_SLACK_BYTES, TuneResult, bound_single, candidate_plans,
                                     cost, estimated_regs, first_probe, probe_literals, tune, tune_arch)
from codegen.build.cache import ObjectCache
from codegen.build.heartbeat import Heartbeat
from codegen.build.kernelcc import HIDDEN, compile_options, compile_tus, compile_twins, stage_sources
from codegen.emit import (Q_KERNEL_RE, TU_OPS, XINV_TU, KernelSource, device_tus, q_symbols, render, render_probe,
                          tu_twins)
from codegen.ir import KernelIR
from codegen.plan import Plan, plan

log = logging.getLogger("exps_codegen")


def _q_kernel_stats(pl: Plan, reports: list[dict]):
    """(chunk, ptxas stats of one arch) for every Q chunk kernel of plan `pl` in `reports` (those of
    a kernel's TUs or probes): its Q chunk kernels are the names of the form `emit.Q_KERNEL_RE`
    (their digest is of their content, not of the kernel key)."""
    for rep in reports:
        for name, per_arch in rep.items():
            m = Q_KERNEL_RE.search(name)
            if m and int(m[1]) < pl.n_chunks:
                for st in per_arch.values():
                    yield int(m[1]), st


def chunk_stats(pl: Plan, reports: list[dict]) -> tuple[list[int], int]:
    """Per chunk kernel: max registers over archs; total spill bytes of the Q kernels that spill
    (store more than `autotune.SPILL_SLACK_BYTES` on an arch: below that, ptxas's own trade of a
    word for occupancy, which the tune counts as none). `reports` are those of the kernel's TUs
    (or probes)."""
    regs = [0] * pl.n_chunks
    spills = 0
    for c, st in _q_kernel_stats(pl, reports):
        regs[c] = max(regs[c], int(st.get("registers", 0)))
        stores = int(st.get("spill_stores", 0))
        if stores > SPILL_SLACK_BYTES:
            spills += stores + int(st.get("spill_loads", 0))
    return regs, spills


def slack_stores(pl: Plan, reports: list[dict]) -> int:
    """Spill stores (bytes) of the Q kernels that `chunk_stats` counts as none: ptxas's own trade
    of a word or two for occupancy (at most `autotune.SPILL_SLACK_BYTES` on an arch)."""
    return sum(s for _, st in _q_kernel_stats(pl, reports)
               if 0 < (s := int(st.get("spill_stores", 0))) <= SPILL_SLACK_BYTES)


#: a plan of more chunk kernels than PROBE_SAMPLE + 2 is probed through PROBE_SAMPLE evenly spaced
#: chunks and the one of the highest estimated registers. Replaying the tuner on the four H200
#: sweeps in tests/data/ (every chunk's registers recorded; tests/test_autotune.py), 6 chooses what
#: it chooses knowing every chunk's registers on all four; 3 does not on two (sweep-2048-h200.json:
#: the sample's Large at 96 ops per chunk, 1.044x slower than 128; sweep-5airs-h200.json:
#: ConnectionNew at 128 instead of 96, 1.028x), 5 not on sweep-11waves-h200.json. On the H200 the
#: sample's Large takes 128 ops per chunk with 6, 1.04x faster than the 96 of 3 (557 -> 581 G); the
#: 3 more chunks a probe of a large Q compiles cost 1.5 s (4%) of the sample's cold build CPU
#: (docs/BENCHMARKS.md, "Levers tried and rejected")
PROBE_SAMPLE = 6


def representatives(q: KernelIR, pl: Plan) -> list[int]:
    """The chunks a probe compiles: all of a small plan; of a large one, PROBE_SAMPLE chunks evenly
    spaced from the first to the last (it writes q), a sample of the plan's register counts, and the
    one with the highest estimated registers (live words and ops: autotune.estimated_regs), the
    likeliest to spill. Compiling 7 chunks instead of a hundred is what makes the tune of a large
    Q cost a few seconds. (A sample of the heaviest chunks only, the 3 highest estimates and the
    last, with every other chunk's estimate scaled by their median measured / estimated ratio,
    takes 64-op chunks for the sample's Large, 1.17x slower on the H200 than 128 and 1.12x than
    96: tests/test_autotune.py replays it on tests/data/sweep-2048-h200.json.)"""
    n = pl.n_chunks
    if n <= PROBE_SAMPLE + 2:
        return list(range(n))
    est = estimated_regs(q, pl)
    top = min(range(n), key=lambda c: (-est[c], c))
    return sorted({round(i * (n - 1) / (PROBE_SAMPLE - 1)) for i in range(PROBE_SAMPLE)} | {top})


def fill_unprobed(q: KernelIR, pl: Plan, regs: list[int], probed: list[int]) -> list[int]:
    """Registers of the chunks a probe did not compile: the probed chunks' registers as a sample of
    the plan's, handed out by estimate rank (the unprobed chunk of the j-th lowest estimate of m gets
    the (j * k // m)-th lowest of the k measured counts). ptxas's registers are a poor function of
    the IR's live words and ops (correlation 0.64 over the 519 chunk kernels of the H200 sweep
    tests/data/sweep-2048-h200.json, 57-212 registers where the estimate says 65-106 on Large's
    96-op plan), so a chunk's own estimate scaled by a measured ratio puts most of Large's chunks
    one or two occupancy steps too low; the sample's distribution keeps the blocks per SM the plan
    has."""
    if len(probed) == pl.n_chunks:
        return regs
    est = estimated_regs(q, pl)
    vals, seen = sorted(regs[c] for c in probed), set(probed)
    rest = sorted((c for c in range(pl.n_chunks) if c not in seen), key=lambda c: (est[c], c))
    out = list(regs)
    for j, c in enumerate(rest):
        out[c] = vals[j * len(vals) // len(rest)]
    return out


def with_twins(ks: KernelSource, chunks: list[int], regs: list[int], tu: str, got: dict, obj_dir: Path, opts: toolchain.CompileOptions, cache: ObjectCache,
               launcher: list[str] | None) -> list[int]:
    """A chunked probe's registers as cc will run them: the probed chunks whose bounded twin
    (`compile_twins`) spills nothing get the twin's registers.
    The sample's Large at 128 ops per chunk runs 605 G on the H200 (docs/BENCHMARKS.md, "GPU kernel
    speed") against 562 G at 96 (`bench/sweep.py`), which the unbounded registers rank first; the
    build bounds 11 of its 43 chunks at 128, 5 of 57 at 96."""
    if ks.plan.n_chunks < 2 or tu not in got:
        return regs
    twin = {"tu": tu, "lib": 0, "chunks": [[c, *q_symbols(ks, c)] for c in sorted(set(chunks))]}
    tw = compile_twins(obj_dir.parent, [twin], {tu: got[tu][1]}, obj_dir, opts, cache, launcher)
    out = list(regs)
    for c, _, tsym in twin["chunks"]:
        if c in tw["bounded"]:      # (bounds.taken: its twin has a report on every arch)
            out[c] = max(int(st.get("registers", 0)) for st in tw["reports"][tu][tsym].values())
    return out


#: a chunked probe whose cost without twins is more than this over the cheapest probe finished
#: before it started gets no twins (`with_twins`): on the sample's Large the twins take 128 ops per
#: chunk 5.1% below its cost without them (8,997 -> 8,535), ahead of 96 (8,761 with or without);
#: Medium's 128-op probe, 13% over its 96, then compiles no twins (1.4 s of nvcc)
TWIN_PROBE_MARGIN = 1.05


class Prober:
    """The search state of one kernel's tune on the tune arch (`autotune.tune_arch`): the probes
    made so far, the cheapest no-spill cost, the chunks each large plan's probe sampled, the single
    kernel's probe (its TU and report, for its bounded twin), and the heartbeat that says which
    probe runs. `compile_plan` is what autotune.tune and autotune.bound_single call.

    When the tune arch is the only target (`as_cc`), a probe compiles its chunks as cc will (`-c
    -fatbin`, the same options; no more ptxas work than `-cubin`), with their bounded twins as cc
    makes them (`with_twins`); other probes are `-cubin` compiles, and only they ask prelude.options
    about `-cubin` (its decision compiles a probe TU twice on a cold cache). Given the kernel's
    `source_hash` (what emit embeds) and a Q of one TU, a first probe the estimate expects to end
    the search (`autotune.first_probe`) compiles the kernel's whole TU exactly as emit writes it
    and cc compiles it: when it does end the search, cc is a cache hit; the single kernel's bounded
    probe is then the twin of that TU (`bounded_twin`), which cc also finds in the cache."""

    def __init__(self, key: str, q: KernelIR, exprs: list, archs: list[int], launcher: list[str] | None,
                 work_dir: str, slots_cap: int, chunk_bounds: bool = True, source_hash: str | None = None):
        self.key, self.q, self.exprs = key, q, exprs
        self.archs, self.launcher, self.work_dir, self.chunk_bounds = archs, launcher, Path(work_dir), chunk_bounds
        self.arch = tune_arch(archs)
        self.cache = ObjectCache()
        self.cubin = toolchain.CompileOptions((self.arch,), extra_flags=HIDDEN, mode="cubin")
        self.as_cc = archs == [self.arch]
        self.probe_q = probe_literals(q)
        self.source_hash = source_hash
        self.whole = source_hash is not None and self.as_cc and len(q.ops) <= TU_OPS
        self.final: tuple[int, dict[str, str]] | None = None   # a first probe compiled as cc will
        if self.whole:
            c0, sure = first_probe(q, candidate_plans(q, slots_cap)[0])
            tu = self.whole_tu(c0) if sure else None
            self.final = (c0, tu) if tu is not None else None
        self.slots_cap = slots_cap
        self.n_probed = 0
        self.sampled: dict[int, list[int]] = {}      # ops per chunk: the chunks its probe compiled
        self.single_slack = 0        # slack_stores of the unbounded single kernel's probe
        self.best_cost = float("inf")   # the cheapest probe finished so far (twins counted)
        self.first_tu: dict = {}        # the single kernel's whole TU (its name, dir, report)
        self.hb: Heartbeat | None = None

    def run(self) -> TuneResult:
        """The search (autotune.tune), then the single kernel's bound (autotune.bound_single)."""
        with Heartbeat(f"tune {self.key} ({len(self.q.ops)} Q ops, sm_{self.arch})") as self.hb:
            res = tune(self.q, self.compile_plan, slots_cap=self.slots_cap, compile_bounded=self.bounded)
            bound_single(self.q, res, self.bounded, self.single_slack)
        res.arch = self.arch
        return res

    def whole_tu(self, c: int) -> dict[str, str] | None:
        """The kernel's one device TU (besides the generic inverse kernel's) as emit writes it at `c`
        ops per chunk, or None when it has more."""
        files = render(KernelSource(self.key, self.q, plan(self.q, c), self.exprs, self.source_hash))
        tus = [n for n in device_tus(files) if n != XINV_TU]
        return {tus[0]: files[tus[0]]} if len(tus) == 1 else None

    def measured(self, pl: Plan, min_blocks: int, got: dict) -> tuple[list[int], int]:
        reports = [r for _, r, _ in got.values()]
        if pl.ops_per_chunk == 0 and not min_blocks:
            self.single_slack = slack_stores(pl, reports)
        return chunk_stats(pl, reports)

    def bounded_twin(self, ks: KernelSource, min_blocks: int) -> tuple[list[int], int]:
        """The single kernel bounded: the twin cc makes of its whole TU, so that cc finds it too."""
        name, src = self.first_tu["name"], self.first_tu["src"]
        sym, twin_sym = q_symbols(ks, 0)
        twin = {"tu": name, "lib": 0, "chunks": [[0, sym, twin_sym]], "blocks": min_blocks}
        tw = compile_twins(src, [twin], {name: self.first_tu["report"]}, src / "obj",
                           compile_options(self.archs, self.cache), self.cache, self.launcher)
        rep = tw["reports"].get(name) or {}
        return chunk_stats(ks.plan, [{n: st for n, st in rep.items() if n == twin_sym}])

    def compile_as_cc(self, tu: dict[str, str], sub: Path, single: bool) -> dict:
        """The kernel's whole TU `tu` compiled as cc will: compile_tus' result; of the single
        kernel's plan, it is the TU its bounded twin is made from (`first_tu`)."""
        got = compile_tus(stage_sources(tu, sub), sub / "obj", compile_options(self.archs, self.cache),
                          self.cache, self.launcher)
        if single:
            name = next(iter(tu))
            self.first_tu.update(name=name, src=sub, report=got[name][1])
        return got

    def compile_plan(self, pl: Plan, min_blocks: int = 0) -> tuple[list[int], int]:
        """One probe: (registers per chunk, spill bytes) of plan `pl` (bounded to `min_blocks`
        blocks per SM: the single kernel's bound)."""
        best_at_start = self.best_cost    # (neighbours compile at once: both see the same)
        self.n_probed += 1
        q, key = self.q, self.key
        ks = KernelSource(key, q, pl, [], "0" * 64, min_blocks=min_blocks)
        reps = representatives(ks.q, ks.plan)
        if self.hb is not None:
            if min_blocks:
                self.hb.status(f"probe {self.n_probed} (the single kernel bounded to {min_blocks} blocks per SM)")
            else:
                self.hb.status(f"probe {self.n_probed} of at most {MAX_PROBES} (chunk {pl.ops_per_chunk or 'single'}: "
                               f"{len(reps)} of {ks.plan.n_chunks} kernels)")
        sub = self.work_dir / f"probe_{pl.ops_per_chunk}_b{min_blocks}"
        # the first probe: compiled as cc will, so that cc finds it if it wins
        tu = None
        if self.final is not None and self.n_probed == 1 and pl.ops_per_chunk == self.final[0]:
            tu = self.final[1]
        elif min_blocks and pl.ops_per_chunk == 0 and self.whole:
            # the single kernel bounded is its whole TU's twin (emit.launch_table), as cc will make
            # it. That TU is the first probe's when it was compiled as cc will; else it is compiled
            # so now (cc then finds both)
            if not self.first_tu and (t0 := self.whole_tu(0)) is not None:
                self.compile_as_cc(t0, self.work_dir / "probe_0_whole", True)
            if self.first_tu:
                return self.bounded_twin(ks, min_blocks)
        if tu is not None:
            got = self.compile_as_cc(tu, sub, pl.ops_per_chunk == 0)
            regs, spills = self.measured(ks.plan, min_blocks, got)
            if self.chunk_bounds and not spills:
                regs = with_twins(ks, list(range(ks.plan.n_chunks)), regs, next(iter(tu)), got,
                                  sub / "obj", compile_options(self.archs, self.cache), self.cache, self.launcher)
            if not spills and not min_blocks:
                self.best_cost = min(self.best_cost, cost(q, pl, regs))
            return regs, spills
        if len(reps) < ks.plan.n_chunks:
            self.sampled[pl.ops_per_chunk] = reps
        if self.as_cc and 1 < ks.plan.n_chunks == len(reps):
            # a plan probed whole: its Q TUs exactly as cc compiles them (the real literals), so
            # that cc finds them if it wins; a constant's edit probes it again (cc's compile)
            tus = stage_sources({n: t for n, t in render(ks).items() if n.endswith(".cu")}, sub)
            twins = [(w["tu"], [c for c, _, _ in w["chunks"]]) for w in tu_twins(ks)]
        else:
            ks = KernelSource(key, self.probe_q, pl, [], "0" * 64, min_blocks=min_blocks)
            tus = stage_sources(render_probe(ks, reps), sub)
            twins = [(tus[0].name, reps)]
        got = compile_tus(tus, sub / "obj", compile_options(self.archs, self.cache) if self.as_cc
                          else prelude.options(self.cubin, self.cache), self.cache, self.launcher)
        regs, spills = self.measured(ks.plan, min_blocks, got)
        if self.chunk_bounds and self.as_cc and not spills and \
                cost(q, pl, fill_unprobed(ks.q, ks.plan, regs, reps)) <= TWIN_PROBE_MARGIN * best_at_start:
            for tu, chunks in twins:
                regs = with_twins(ks, chunks, regs, tu, got, sub / "obj", compile_options(self.archs, self.cache),
                                  self.cache, self.launcher)
        regs = fill_unprobed(ks.q, ks.plan, regs, reps)
        if not spills and not min_blocks:
            self.best_cost = min(self.best_cost, cost(q, pl, regs))
        return regs, spills

    def bounded(self, b: int) -> tuple[list[int], int]:
        return self.compile_plan(plan(self.q, 0), min_blocks=b)
