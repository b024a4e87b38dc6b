"""codegen.plan: chunking, cross-chunk values, scratch-slot colouring (property tests on random IR)."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import plan as planmod
from codegen.ir import KernelIR, Leaf, Op, Val, ir_from_json, ir_to_json
from codegen.coverage import cover
from codegen.model import load_air
from codegen.plan import Plan, last_uses, max_live, plan

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"

LEAF1 = [Leaf("cm", 1, stage=1, col=0), Leaf("const", 1, col=1, shift=2), Leaf("number", 1, value=5),
         Leaf("public", 1, col=0), Leaf("zi", 1)]
LEAF3 = [Leaf("cm", 3, stage=2, col=0, shift=-2), Leaf("challenge", 3, col=3), Leaf("eval", 3, col=0)]


# ----------------------------------------------------------------------------- random IR
@st.composite
def kernel_irs(draw, max_ops: int = 60) -> KernelIR:
    """A random valid KernelIR: ops read earlier values (biased towards far ones too) and leaves."""
    n = draw(st.integers(1, max_ops))
    dims: list[int] = []
    ops: list[Op] = []

    def arg(i: int):
        if i and draw(st.booleans()):
            # mix of recent and far values
            if draw(st.booleans()):
                v = draw(st.integers(max(0, i - 4), i - 1))
            else:
                v = draw(st.integers(0, i - 1))
            return Val(v, dims[v])
        d = draw(st.sampled_from([1, 3]))
        return draw(st.sampled_from(LEAF1 if d == 1 else LEAF3))

    for i in range(n):
        if draw(st.integers(0, 9)) == 0:
            a = arg(i)
            ops.append(Op("copy", str(a.dim), a, None, a.dim))
        else:
            a, b = arg(i), arg(i)
            if a.dim < b.dim:
                a, b = b, a
            shape = {(1, 1): "11", (3, 1): "31", (3, 3): "33"}[(a.dim, b.dim)]
            ops.append(Op(draw(st.sampled_from(["add", "sub", "mul", "sub_swap"])), shape, a, b, a.dim))
        dims.append(ops[-1].dim)
    return KernelIR(draw(st.integers(0, 1000)), True, tuple(ops))


def _chunk_of(pl: Plan, n: int) -> list[int]:
    out = [-1] * n
    for c, (s, e) in enumerate(pl.chunks):
        for i in range(s, e):
            out[i] = c
    return out


def _intervals(ir: KernelIR, pl: Plan) -> dict[int, tuple[int, int]]:
    """value -> (defining chunk, last chunk reading it), for values read outside their chunk."""
    ch = _chunk_of(pl, len(ir.ops))
    iv: dict[int, tuple[int, int]] = {}
    for i, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val) and ch[a.id] != ch[i]:
                lo, hi = iv.get(a.id, (ch[a.id], ch[a.id]))
                iv[a.id] = (lo, max(hi, ch[i]))
    return iv


def _op_intervals(ir: KernelIR, pl: Plan) -> dict[int, tuple[int, int]]:
    """value -> (its op, the op of its last load: its first use in the last chunk reading it),
    for values read outside their chunk: the ops over which its slot must hold it."""
    ch = _chunk_of(pl, len(ir.ops))
    iv = _intervals(ir, pl)
    first_in_last = {}
    for i, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val) and a.id in iv and ch[i] == iv[a.id][1]:
                first_in_last.setdefault(a.id, i)
    return {v: (v, first_in_last[v]) for v in iv}


def check_plan(ir: KernelIR, k: int) -> Plan:
    n = len(ir.ops)
    pl = plan(ir, k)
    # chunks cover every op once, in order
    assert pl.chunks[0][0] == 0 and pl.chunks[-1][1] == n
    for (s0, e0), (s1, e1) in zip(pl.chunks, pl.chunks[1:]):
        assert e0 == s1
    if k <= 0 or k >= n:
        assert pl == Plan(0, ((0, n),), {}, ((),), ((),), 0, 0)
        assert pl.min_scratch == 0 and pl.total_slots == 0
        return pl
    assert pl.ops_per_chunk == k
    # ceil(n / k) non-empty chunks, cut i within k // 8 of i * k
    assert pl.n_chunks == -(-n // k)
    assert all(e > s for s, e in pl.chunks)
    assert all(abs(s - i * k) <= k // 8 for i, (s, _) in enumerate(pl.chunks))
    ch = _chunk_of(pl, n)
    iv = _intervals(ir, pl)
    # exactly the cross values have slots; loads and stores are exactly what each chunk needs
    assert set(pl.slot_of) == set(iv)
    for c in range(pl.n_chunks):
        s, e = pl.chunks[c]
        need = sorted({a.id for i in range(s, e) for a in ir.ops[i].args()
                       if isinstance(a, Val) and ch[a.id] != c})
        assert list(pl.loads[c]) == need
        assert sorted(pl.stores[c]) == sorted(v for v in iv if ch[v] == c)
        assert all(v < s for v in pl.loads[c])               # only earlier chunks feed a chunk
    # slot ranges: dim 1 in [0, n1), dim 3 in [n1, n1 + 3 n3), 3-aligned
    for v, slot in pl.slot_of.items():
        if ir.ops[v].dim == 1:
            assert 0 <= slot < pl.n_slots1
        else:
            assert pl.n_slots1 <= slot and slot + 3 <= pl.total_slots and (slot - pl.n_slots1) % 3 == 0
    assert pl.total_slots == pl.n_slots1 + 3 * pl.n_slots3
    assert pl.min_scratch == pl.total_slots * 256
    # values whose op intervals [definition, last load] overlap never share a scratch word
    oi = _op_intervals(ir, pl)
    items = sorted(pl.slot_of.items())
    for x, (u, su) in enumerate(items):
        for v, sv in items[x + 1:]:
            (a0, a1), (b0, b1) = oi[u], oi[v]
            if a0 <= b1 and b0 <= a1:
                ru = set(range(su, su + ir.ops[u].dim))
                rv = set(range(sv, sv + ir.ops[v].dim))
                assert not ru & rv, (u, v, oi[u], oi[v], su, sv)
    # the greedy colouring of intervals is optimal: colours = max overlap per pool
    for dim, count in ((1, pl.n_slots1), (3, pl.n_slots3)):
        ivs = [oi[v] for v in oi if ir.ops[v].dim == dim]
        depth = max((sum(lo <= x <= hi for lo, hi in ivs) for x in range(n)), default=0)
        assert count == depth
    simulate(ir, pl)
    return pl


def simulate(ir: KernelIR, pl: Plan) -> None:
    """Run the emitted protocol on symbols: per chunk, a value from an earlier chunk is loaded
    from its slot at its first use, a stored value is written right after its definition."""
    scratch: dict[int, tuple[int, int]] = {}
    stores = [set(s) for s in pl.stores]
    for c, (s, e) in enumerate(pl.chunks):
        regs: set[int] = set()
        for i in range(s, e):
            for a in ir.ops[i].args():
                if isinstance(a, Val) and a.id not in regs:
                    assert a.id < s, "a value of this chunk is defined before its use"
                    slot = pl.slot_of[a.id]
                    for d in range(a.dim):
                        assert scratch.get(slot + d) == (a.id, d), f"slot {slot + d} clobbered before op {i}"
                    regs.add(a.id)
            regs.add(i)
            if i in stores[c]:
                for d in range(ir.ops[i].dim):
                    scratch[pl.slot_of[i] + d] = (i, d)


# ----------------------------------------------------------------------------- properties
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel_irs(), st.integers(-1, 70))
def test_plan_properties(ir: KernelIR, k: int) -> None:
    check_plan(ir, k)


@settings(max_examples=150, deadline=None)
@given(kernel_irs(max_ops=40), st.integers(1, 8))
def test_plan_properties_small_chunks(ir: KernelIR, k: int) -> None:
    check_plan(ir, k)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel_irs(max_ops=200), st.integers(8, 48))
def test_plan_properties_moving_cuts(ir: KernelIR, k: int) -> None:
    """Chunks of >= 8 ops, so every cut may move (by up to k // 8) to where fewer words cross."""
    check_plan(ir, k)


@settings(max_examples=100, deadline=None)
@given(kernel_irs(), st.integers(0, 20))
def test_plan_is_deterministic(ir: KernelIR, k: int) -> None:
    a = plan(ir, k)
    b = plan(ir_from_json(ir_to_json(ir)), k)
    assert a == b
    assert list(a.slot_of.items()) == list(b.slot_of.items())
    assert a.summary() == b.summary() == {"ops_per_chunk": a.ops_per_chunk, "chunks": a.n_chunks,
                                          "slots": a.total_slots}


@settings(max_examples=200, deadline=None)
@given(kernel_irs())
def test_max_live_is_the_brute_force_maximum(ir: KernelIR) -> None:
    last = last_uses(ir)
    n = len(ir.ops)
    # value v is live at op i if it is defined at or before i and read at or after i
    want = max(sum(ir.ops[v].dim for v in range(i + 1) if last[v] >= i) for i in range(n))
    assert max_live(ir) == want
    for v in range(n):
        readers = [i for i, op in enumerate(ir.ops) for a in op.args() if isinstance(a, Val) and a.id == v]
        assert last[v] == (max(readers) if readers else v)


# ----------------------------------------------------------------------------- hand cases
C0 = Leaf("cm", 1, stage=1, col=0)
C1 = Leaf("cm", 1, stage=1, col=1)
CH = Leaf("challenge", 3, col=0)
HAND = KernelIR(1, True, (
    Op("add", "11", C0, C1, 1),                 # v0, read by 2 and 5
    Op("mul", "31", CH, C0, 3),                 # v1, read by 2
    Op("mul", "31", Val(1, 3), Val(0, 1), 3),   # v2, read by 3 and 6
    Op("sub", "11", C1, C0, 1),                 # v3, read by 4
    Op("mul", "11", Val(3, 1), C1, 1),          # v4, read by 5
    Op("add", "11", Val(4, 1), Val(0, 1), 1),   # v5, read by 6
    Op("mul", "31", Val(2, 3), Val(5, 1), 3),   # v6: the result
))


def test_hand_last_uses_and_max_live() -> None:
    assert last_uses(HAND) == [5, 2, 6, 4, 5, 6, 6]
    # words live at op i (defined at or before i, read at or after i):
    # {v0} {v0 v1} {v0 v1 v2} {v0 v2 v3} {v0 v2 v3 v4} {v0 v2 v4 v5} {v2 v5 v6}
    per_op = [1, 1 + 3, 1 + 3 + 3, 1 + 3 + 1, 1 + 3 + 1 + 1, 1 + 3 + 1 + 1, 3 + 1 + 3]
    assert max_live(HAND) == max(per_op) == 7


def test_hand_plan_chunks_of_2() -> None:
    pl = plan(HAND, 2)
    assert pl.chunks == ((0, 2), (2, 4), (4, 6), (6, 7))
    # cross values: v0 (chunk 0 -> 2), v1 (0 -> 1), v2 (1 -> 3), v3 (1 -> 2), v5 (2 -> 3)
    assert pl.loads == ((), (0, 1), (0, 3), (2, 5))
    assert [sorted(s) for s in pl.stores] == [[0, 1], [2, 3], [5], []]
    # op intervals [definition, first use in the last chunk reading it]:
    # dim 1: v0 [0,5], v3 [3,4], v5 [5,6] -> v5 reuses v3's slot (v3 is loaded at op 4, before v5
    # is stored after op 5; by chunks, [1,2] and [2,3] touch and would take a third slot);
    # dim 3: v1 [1,2], v2 [2,6] -> 2 colours
    assert (pl.n_slots1, pl.n_slots3, pl.total_slots) == (2, 2, 8)
    assert pl.slot_of == {0: 0, 3: 1, 5: 1, 1: 2, 2: 5}
    assert pl.min_scratch == 8 * 256
    check_plan(HAND, 2)


def test_hand_plan_slot_reuse() -> None:
    """A slot is reused by a value defined after its owner's last load (not at that very op)."""
    ops = [Op("add", "11", C0, C1, 1)]                   # v0 chunk 0, read in chunk 1
    ops.append(Op("mul", "11", Val(0, 1), C0, 1))        # v1 chunk 1, read in chunk 2
    ops.append(Op("mul", "11", Val(1, 1), C0, 1))        # v2 chunk 2, read in chunk 3
    ops.append(Op("mul", "11", Val(2, 1), C0, 1))        # v3 chunk 3
    ir = KernelIR(0, True, tuple(ops))
    pl = plan(ir, 1)
    # op intervals [0,1], [1,2], [2,3]: touching ones conflict
    assert pl.slot_of == {0: 0, 1: 1, 2: 0}
    assert pl.total_slots == 2
    check_plan(ir, 1)


@pytest.mark.parametrize("k", [0, -5, 7, 8, 1000])
def test_single_kernel(k: int) -> None:
    pl = plan(HAND, k)
    assert pl == Plan(0, ((0, 7),), {}, ((),), ((),), 0, 0)
    assert (pl.n_chunks, pl.total_slots, pl.min_scratch) == (1, 0, 0)


def test_one_op_per_chunk_and_one_op() -> None:
    pl = check_plan(HAND, 1)
    assert pl.n_chunks == 7
    one = KernelIR(0, True, (Op("mul", "11", C0, C1, 1),))
    assert plan(one, 1) == Plan(0, ((0, 1),), {}, ((),), ((),), 0, 0)


@pytest.mark.parametrize("name,k", [("Large", 256), ("Large", 64), ("Medium", 32), ("Tiny", 5)])
def test_sample_q_plans(name: str, k: int) -> None:
    d = SAMPLE / f"synth/Basic/airs/{name}/air"
    si, ei = load_air(d / f"{name}.starkinfo.json", d / f"{name}.expressionsinfo.json")
    q = cover(si, ei).q
    pl = check_plan(q, k)
    assert pl.n_chunks == -(-len(q.ops) // k)
    assert pl == plan(q, k)


def test_slot_rows_constant() -> None:
    assert planmod.SLOT_ROWS == 256


def _live_words_brute(ir: KernelIR, x: int) -> int:
    """Words of the values defined before op x and read at op x or later (brute force)."""
    return sum(ir.ops[v].dim for v in range(x)
               if any(isinstance(a, Val) and a.id == v for i in range(x, len(ir.ops)) for a in ir.ops[i].args()))


def _slots_by_chunks_at_fixed_cuts(ir: KernelIR, k: int) -> int:
    """The older rule: cuts at every k ops, slots coloured over chunk intervals."""
    n = len(ir.ops)
    ch = [i // k for i in range(n)]
    lu = last_uses(ir)
    iv = {v: (ch[v], ch[lu[v]]) for v in range(n) if ch[lu[v]] > ch[v]}
    out = 0
    for dim in (1, 3):
        ivs = [iv[v] for v in iv if ir.ops[v].dim == dim]
        out += dim * max((sum(lo <= c <= hi for lo, hi in ivs) for c in range(ch[-1] + 1)), default=0)
    return out


@pytest.mark.parametrize("name,k,slots,before", [("Medium", 64, 9, 22), ("Large", 64, 172, 197)])
def test_cuts_where_fewest_words_cross_need_fewer_slots(name: str, k: int, slots: int, before: int) -> None:
    """Each cut sits where the fewest words are live within k // 8 of i * k; with op-interval
    colouring the sample's Q needs far fewer scratch slots than fixed cuts coloured by chunks."""
    d = SAMPLE / f"synth/Basic/airs/{name}/air"
    si, ei = load_air(d / f"{name}.starkinfo.json", d / f"{name}.expressionsinfo.json")
    q = cover(si, ei).q
    pl = check_plan(q, k)
    w = k // 8
    for i, (s, _) in enumerate(pl.chunks[1:], 1) if name == "Medium" else ():
        window = range(max(pl.chunks[i - 1][0] + 1, i * k - w), min(len(q.ops) - 1, i * k + w) + 1)
        assert _live_words_brute(q, s) == min(_live_words_brute(q, x) for x in window)
    assert planmod.live_across(q)[1:6] == [_live_words_brute(q, x) for x in range(1, 6)]
    assert (pl.total_slots, _slots_by_chunks_at_fixed_cuts(q, k)) == (slots, before)
