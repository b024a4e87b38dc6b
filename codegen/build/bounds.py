"""Per-chunk launch bounds of a chunked Q: a chunk kernel gets `__launch_bounds__(256, b)`,
b one resident block per SM more than its registers allow, wherever ptxas then stores nothing.

Which chunks that is only ptxas can say (its registers are a poor function of the IR, and a bound
that fits one chunk spills its neighbour: docs/BENCHMARKS.md, "Levers tried and rejected"), so `cc`
compiles each device TU that holds chunk kernels twice: as emitted, then as its bounded twin (the
same text with `-DEXPS_TWIN -DEXPS_B_<chunk>=<b>` for the chunks that could gain,
templates/q_chunks.cu.j2: only those kernels, as `<name>_kb`). The launch table then names, per
chunk, the twin's kernel where the twin spilled nothing on every target arch
(`-DEXPS_TWIN_TU_<slot>`, `-DEXPS_TWIN_C<chunk>` on its compile, templates/abi.cpp.j2), else the
kernel as emitted. Only integers reach those flags.

A bound changes where ptxas keeps values, never what a kernel computes: the twin's kernel is the
same row function (the host check compiles that text once; the GPU check runs whichever the table
names)."""
from __future__ import annotations

from codegen.build.autotune import BLOCK, MAX_THREADS_PER_SM, REGS_PER_SM, SPILL_SLACK_BYTES, occupancy

#: a chunk is bounded only up to this many blocks per SM (80 registers at 256 threads): a kernel of
#: 65-80 registers bounded to 64 (4 blocks) gains nothing measurable on the H200 (ConnectionNew,
#: Medium, Large: 1.00x against this limit; docs/BENCHMARKS.md, "Levers tried and rejected") and
#: its twin compile costs as much as any other's; 2 -> 3 blocks (81-128 registers to 80) is where
#: ConnectionNew and Medium gain, 1 -> 2 (> 128 to 128) where Large does
MAX_TWIN_BLOCKS = 3
#: a bounded kernel is taken when ptxas stores at most this many bytes to local memory in it. More
#: gains nothing on the H200 (the sample's Large at 128 ops per chunk, same run: 8 bounded chunks
#: 33.98 ms; 64 B: 16 bounded, 33.75 ms; 192 B: 25, 34.00 ms; 1,024 B: 30, 34.94 ms; 32 B: 11,
#: 1.01x on Large twice, and Intermediates 0.99x, its chunk 1 bounded too; docs/BENCHMARKS.md,
#: "Levers tried and rejected")
TWIN_SPILL_BYTES = SPILL_SLACK_BYTES
#: a chunk is not tried bounded when its registers as emitted are at least this many times what the
#: bound leaves it (`bound_regs`): of the 105 twins a cold build of the sample, ../shared/pk and the
#: 3,000- and 8,000-op synthetic Qs compiles (tests/data/twins.json), all 30 such spill 16-428
#: bytes (22 of them chunks at exactly 128 registers, ptxas's own 2-block fit, bounded to 80),
#: while 2 of the 5 at 126 registers run bounded. Each twin not compiled saves a ptxas run of its
#: chunk
MAX_SQUEEZE = 1.6


def bound_regs(b: int) -> int:
    """The registers per thread `__launch_bounds__(256, b)` leaves (allocated in steps of 8)."""
    return REGS_PER_SM // (b * BLOCK) // 8 * 8


def blocks(regs: int) -> int:
    """Resident 256-thread blocks per SM at `regs` registers per thread."""
    return round(occupancy(regs) * MAX_THREADS_PER_SM / BLOCK)


def _stats(report: dict, sym: str) -> list[dict]:
    return list((report.get(sym) or {}).values())


def candidates(twin: dict, report: dict) -> dict[int, int]:
    """{chunk: min blocks} of the chunks of manifest twin `twin` ({"chunks": [[c, sym, twin_sym]]})
    whose kernel as emitted (`report`: its TU's ptxas report, every arch) could take a bound: one
    block more than its registers allow on the arch where it has most, at most MAX_TWIN_BLOCKS,
    no spill beyond ptxas's own trade of a word on any arch (a bound would only add to it), and
    fewer registers than MAX_SQUEEZE times what the bound leaves.
    The twin of a single kernel its tune bounded (`blocks`: emit.tu_twins) has that bound, as the
    tune measured it."""
    out: dict[int, int] = {}
    for c, sym, _ in twin["chunks"]:
        st = _stats(report, sym)
        if "blocks" in twin:
            if st:
                out[int(c)] = int(twin["blocks"])
            continue
        if not st or any(int(s.get("spill_stores", 0)) > SPILL_SLACK_BYTES for s in st):
            continue
        regs = max(int(s.get("registers", 0)) for s in st)
        b = blocks(regs) + 1
        if b <= MAX_TWIN_BLOCKS and regs < MAX_SQUEEZE * bound_regs(b):
            out[int(c)] = b
    return out


def taken(twin: dict, cand: dict[int, int], report: dict, base: dict) -> list[int]:
    """The chunks of `cand` whose bounded kernel (`report`: the twin's ptxas report) is an entry on
    every arch its kernel as emitted was compiled for (`base`: its TU's report) and stores at most
    TWIN_SPILL_BYTES on each."""
    out = []
    for c, sym, tsym in twin["chunks"]:
        if int(c) not in cand:
            continue
        per_arch = report.get(tsym) or {}
        if not per_arch or set(per_arch) != set(base.get(sym) or {}):
            continue
        if all(st.get("entry") and int(st.get("spill_stores", 0)) <= TWIN_SPILL_BYTES
               for st in per_arch.values()):
            out.append(int(c))
    return sorted(out)


def twin_flags(cand: dict[int, int]) -> tuple[str, ...]:
    """The twin compile's defines: EXPS_TWIN and EXPS_B_<chunk>=<min blocks>."""
    return ("-DEXPS_TWIN",) + tuple(f"-DEXPS_B_{int(c)}={int(b)}" for c, b in sorted(cand.items()))


def table_flags(libs: list[int], chunks: list[int]) -> tuple[str, ...]:
    """The launch table's defines: the twin slots it embeds and the chunks that launch a twin."""
    return tuple(f"-DEXPS_TWIN_TU_{int(x)}=1" for x in sorted(libs)) + \
        tuple(f"-DEXPS_TWIN_C{int(c)}=1" for c in sorted(chunks))
