"""Liveness, chunking and scratch-slot colouring of the Q expression (spec §5 launcher).

A chunked Q runs as a sequence of kernels over waves of rows. A value defined in chunk `i` and read
in a later chunk lives in scratch slot(s) between them: scratch[(slot + d) * WAVE + lo]. The
emitted protocol (emit.chunk_body): a value is stored right after its definition, and a chunk
loads a value from an earlier chunk at its first use there. So a crossing value occupies its
slot over the op interval [its definition, its first use in the last chunk that reads it], and
slots are coloured greedily over those intervals, in a deterministic order: a slot is reused only
by a value defined after the previous owner's last load. dim-1 values use the first pool (slots
0..n1-1), dim-3 values take 3 consecutive slots in the second pool.

Cuts: chunk i ends near i * ops_per_chunk, within +-ops_per_chunk // 8, where the fewest words are
live across the cut (fewer values to store and load, fewer slots: in the prover every slot costs
rows per wave, spec §5 and docs/BENCHMARKS.md); the chunk count stays ceil(n / ops_per_chunk).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from codegen.ir import KernelIR, Val

SLOT_ROWS = 256  # exps_min_scratch = total_slots * 256


@dataclass(frozen=True)
class Plan:
    ops_per_chunk: int              # 0 = a single kernel
    chunks: tuple[tuple[int, int], ...]   # [start, end) op ranges
    slot_of: dict[int, int] = field(default_factory=dict)   # value id -> first scratch slot
    loads: tuple[tuple[int, ...], ...] = ()     # per chunk: cross values read there
    stores: tuple[tuple[int, ...], ...] = ()    # per chunk: values stored at its end
    n_slots1: int = 0
    n_slots3: int = 0

    @property
    def total_slots(self) -> int:
        return self.n_slots1 + 3 * self.n_slots3

    @property
    def n_chunks(self) -> int:
        return len(self.chunks)

    @property
    def min_scratch(self) -> int:
        return self.total_slots * SLOT_ROWS if self.n_chunks > 1 else 0

    def summary(self) -> dict:
        return {"ops_per_chunk": self.ops_per_chunk, "chunks": self.n_chunks,
                "slots": self.total_slots}


def last_uses(ir: KernelIR) -> list[int]:
    """last_use[v] = index of the last op reading value v (v itself if never read)."""
    last = list(range(len(ir.ops)))
    for i, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val):
                last[a.id] = i
    return last


def max_live(ir: KernelIR) -> int:
    """Largest number of base-field words live at once (a register-pressure estimate)."""
    last = last_uses(ir)
    ends: dict[int, int] = {}
    live = best = 0
    for i, op in enumerate(ir.ops):
        live += op.dim
        best = max(best, live)
        ends[last[i]] = ends.get(last[i], 0) + op.dim
        live -= ends.pop(i, 0)
    return best


def _color(intervals: list[tuple[int, int, int]]) -> tuple[dict[int, int], int]:
    """Greedy interval colouring; intervals (start, end, value) -> ({value: colour}, n_colours)."""
    free_at: list[int] = []   # colour -> last chunk of its current owner
    out = {}
    for start, end, v in sorted(intervals):
        for c, busy_until in enumerate(free_at):
            if busy_until < start:
                free_at[c] = end
                out[v] = c
                break
        else:
            out[v] = len(free_at)
            free_at.append(end)
    return out, len(free_at)


def live_across(ir: KernelIR) -> list[int]:
    """live[x] = words of the values defined before op x and read at or after it (x in 0..n)."""
    n = len(ir.ops)
    delta = [0] * (n + 2)
    for v, u in enumerate(last_uses(ir)):
        if u > v:
            delta[v + 1] += ir.ops[v].dim
            delta[u + 1] -= ir.ops[v].dim
    live, cur = [], 0
    for x in range(n + 1):
        cur += delta[x]
        live.append(cur)
    return live


def cuts(ir: KernelIR, ops_per_chunk: int) -> tuple[tuple[int, int], ...]:
    """Chunk ranges: cut i at the position of fewest live words within ops_per_chunk // 8 of
    i * ops_per_chunk (ties: the nearest, then the earliest)."""
    n, k = len(ir.ops), ops_per_chunk
    w = k // 8
    live = live_across(ir) if w else []
    bounds = [0]
    for i in range(1, -(-n // k)):
        lo, hi = max(bounds[-1] + 1, i * k - w), min(n - 1, i * k + w)
        bounds.append(min(range(lo, hi + 1), key=lambda x: (live[x], abs(x - i * k), x)) if w else i * k)
    bounds.append(n)
    return tuple(zip(bounds, bounds[1:]))


def plan(ir: KernelIR, ops_per_chunk: int = 0) -> Plan:
    n = len(ir.ops)
    if ops_per_chunk <= 0 or ops_per_chunk >= n:
        return Plan(0, ((0, n),), loads=((),), stores=((),))
    return plan_chunks(ir, ops_per_chunk, cuts(ir, ops_per_chunk))


def plan_chunks(ir: KernelIR, ops_per_chunk: int, chunks: tuple[tuple[int, int], ...]) -> Plan:
    """The plan of given chunk ranges (consecutive, non-empty, covering every op): the values that
    cross a cut, their loads and stores, their slots. `ops_per_chunk` is only recorded."""
    n = len(ir.ops)
    if not chunks or chunks[0][0] != 0 or chunks[-1][1] != n or \
            any(s >= e or e != s2 for (s, e), (s2, _) in zip(chunks, chunks[1:] + ((n, n),))):
        raise ValueError(f"chunks {chunks[:4]!r}... do not cover the {n} ops in order")
    if len(chunks) == 1:
        return Plan(ops_per_chunk, chunks, loads=((),), stores=((),))
    chunk_of = [c for c, (s, e) in enumerate(chunks) for _ in range(s, e)]
    last_chunk = [chunk_of[u] for u in last_uses(ir)]
    cross = [v for v in range(n) if last_chunk[v] > chunk_of[v]]
    # a crossing value's last load: its first use in the last chunk that reads it
    last_load: dict[int, int] = {}
    for i, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val) and chunk_of[i] == last_chunk[a.id] > chunk_of[a.id]:
                last_load.setdefault(a.id, i)
    iv1 = [(v, last_load[v], v) for v in cross if ir.ops[v].dim == 1]
    iv3 = [(v, last_load[v], v) for v in cross if ir.ops[v].dim == 3]
    c1, n1 = _color(iv1)
    c3, n3 = _color(iv3)
    slot_of = {v: c for v, c in c1.items()}
    slot_of.update({v: n1 + 3 * c for v, c in c3.items()})
    loads: list[set[int]] = [set() for _ in chunks]
    for i, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val) and chunk_of[a.id] != chunk_of[i]:
                loads[chunk_of[i]].add(a.id)
    stores: list[list[int]] = [[] for _ in chunks]
    for v in cross:
        stores[chunk_of[v]].append(v)
    return Plan(ops_per_chunk, chunks, slot_of, tuple(tuple(sorted(s)) for s in loads),
                tuple(tuple(s) for s in stores), n1, n3)
