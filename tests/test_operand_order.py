"""The IR passes keep each op's operand order and read each value from where it lives.

Every op is a deterministic function of its operands' raw words, and `gl_add` / `gl_sub` are not
bitwise commutative: `add(a, b)` canonicalises only its LEFT operand, so `add(p + 5, 2) = 7` but
`add(2, p + 5) = p + 7` (spec §1.1). A pass that merges `add(a, b)` with `add(b, a)`, swaps a
`sub`'s operands, or reads a value (or a scratch slot) other than the one the IR names, gives wrong
raw words only on the few rows whose words make the order visible, and random inputs rarely hold
such words. So the checks here do not depend on a draw:

* a term check: each value of an IR is the term `arith(shape, A, B)` of its operands' terms (copy
  is its operand; `sub_swap(A, B)` is `sub(B, A)`; the 1x1 and 3x3 products, whose words do not
  depend on the order, take their operands as a set), leaves are distinct symbols. Two IRs with
  the same result term write the same words for ANY input. The IR as lowered from the JSON is
  compared with what the emitter compiles (`KernelSource`: CSE, dead code, replanning, remat), the
  chunked plan run as the kernels run it: a value stored to its scratch slot(s) right after its
  definition, loaded from them at its first use in a later chunk, the slot of a value dead since
  its last load reused.
* end to end: a hand-made Q whose adds read both orders of the same operands, compiled by g++
  from the emitter's sources, against the numpy oracle's op semantics over the IR before the
  passes, with inputs chosen so that every add's raw words depend on its operand order (a check
  here asserts it: each add with its operands swapped changes the oracle's words) and scalars
  (challenges) drawn afresh for each of several launches.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen.check import hostcheck
from codegen.coverage import cover
from codegen.emit import KernelSource, render
from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.model import load_air, parse_starkinfo
from codegen.passes import optimize
from codegen.plan import Plan, plan
from codegen.remat import remat
from require import PK, kernel_params, pk_params, requires

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "provingkey-sample"
P, EPS = hostcheck.P, hostcheck.EPS


# --------------------------------------------------------------------------------- the term check
class Terms:
    """Interned terms: equal ids <=> equal terms (one table for the IRs compared)."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}

    def of(self, key: tuple) -> int:
        return self.ids.setdefault(key, len(self.ids))

    def leaf(self, lf: Leaf) -> int:
        return self.of(("leaf", lf))

    def op(self, op: Op, a: int, b: int | None) -> int:
        if op.arith == "copy":
            return a
        if op.arith == "sub_swap" and op.shape != "31":      # B - A, the same words as sub(B, A)
            return self.of(("sub", op.shape, b, a))
        if op.arith == "mul" and op.shape in ("11", "33"):    # the product's words: a set of operands
            return self.of(("mul", op.shape, min(a, b), max(a, b)))
        return self.of((op.arith, op.shape, a, b))


def ir_terms(ir: KernelIR, t: Terms) -> list[int]:
    """The term of each value of `ir`, every op reading the value its operand names."""
    vals: list[int] = []

    def arg(x):
        if x is None:
            return None
        return vals[x.id] if isinstance(x, Val) else t.leaf(x)
    for op in ir.ops:
        vals.append(t.op(op, arg(op.a), arg(op.b)))
    return vals


def run_plan(ir: KernelIR, pl: Plan, t: Terms) -> int:
    """The result term of `ir` run as the chunk kernels of `pl` run it: within a chunk a value is
    read where it was defined or loaded; a value of an earlier chunk is loaded from its scratch
    slot(s) at its first use in the chunk (it must be among the chunk's declared loads); a value in
    its chunk's stores is written to its slot(s) right after its definition."""
    chunk_of = [c for c, (s, e) in enumerate(pl.chunks) for _ in range(s, e)]
    assert len(chunk_of) == len(ir.ops)
    scratch: dict[int, tuple[int, int]] = {}     # slot -> (term, component)
    own: dict[int, int] = {}                     # value -> term, where it was defined
    loaded: dict[int, int] = {}                  # this chunk's loads: value -> term
    chunk = -1
    for i, op in enumerate(ir.ops):
        if chunk_of[i] != chunk:
            chunk, loaded = chunk_of[i], {}
        args = []
        for x in op.args():
            if not isinstance(x, Val):
                args.append(t.leaf(x))
            elif chunk_of[x.id] == chunk:
                args.append(own[x.id])
            else:
                if x.id not in loaded:
                    assert x.id in pl.loads[chunk], f"op {i} reads v{x.id} of chunk {chunk_of[x.id]} unloaded"
                    slot = pl.slot_of[x.id]
                    words = [scratch.get(slot + d) for d in range(x.dim)]
                    first = words[0]
                    assert first is not None and words == [(first[0], d) for d in range(x.dim)], \
                        f"op {i}: the slot of v{x.id} holds {words}"
                    loaded[x.id] = first[0]
                args.append(loaded[x.id])
        own[i] = t.op(op, args[0], args[1] if len(args) > 1 else None)
        if i in pl.stores[chunk]:
            for d in range(op.dim):
                scratch[pl.slot_of[i] + d] = (own[i], d)
    return own[len(ir.ops) - 1]


def assert_same_words(before: KernelIR, after: KernelIR, pl: Plan | None = None) -> None:
    """`after` (run as `pl`'s chunks, if given) computes `before`'s result term."""
    t = Terms()
    want = ir_terms(before, t)[-1]
    got = run_plan(after, pl, t) if pl is not None else ir_terms(after, t)[-1]
    assert got == want, "the result's term differs"
    assert after.out_dim == before.out_dim


def check_kernel_source(q: KernelIR, exprs: list, opc: int) -> KernelSource:
    ks = KernelSource("k", q, plan(q, opc), list(exprs), "0" * 64)
    assert ks.q_in is q
    assert_same_words(q, ks.q, ks.plan)
    assert [x.ir.exp_id for x in ks.exprs] == [x.ir.exp_id for x in exprs]
    for x, y in zip(ks.exprs, exprs):
        assert (x.num1, x.inv) == (y.num1, y.inv)
        assert_same_words(y.ir, x.ir)
    return ks


# ------------------------------------------------------------------------- the term check by hand
A, B = Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1)
X, CH = Leaf("cm", 3, stage=1, col=2), Leaf("challenge", 3, col=0)


def test_the_term_check_sees_operand_order_and_wrong_values() -> None:
    """What the term check tells apart, and what it takes as equal (the words of both are equal
    for every input: the products' words do not depend on their operands' order)."""
    base = KernelIR(0, True, (Op("add", "11", A, B, 1), Op("mul", "11", Val(0, 1), A, 1)))
    same = [KernelIR(0, True, (Op("add", "11", A, B, 1), Op("mul", "11", A, Val(0, 1), 1))),
            KernelIR(0, True, (Op("add", "11", A, B, 1), Op("copy", "1", Val(0, 1), None, 1),
                                Op("mul", "11", Val(1, 1), A, 1)))]
    differ = [KernelIR(0, True, (Op("add", "11", B, A, 1), Op("mul", "11", Val(0, 1), A, 1))),
              KernelIR(0, True, (Op("add", "11", A, B, 1), Op("mul", "11", Val(0, 1), B, 1))),
              KernelIR(0, True, (Op("sub", "11", A, B, 1), Op("mul", "11", Val(0, 1), A, 1)))]
    for ir in same:
        assert_same_words(base, ir)
    for ir in differ:
        with pytest.raises(AssertionError, match="term differs"):
            assert_same_words(base, ir)
    t = Terms()
    [s] = ir_terms(KernelIR(0, True, (Op("sub", "11", A, B, 1),)), t)
    [w] = ir_terms(KernelIR(0, True, (Op("sub_swap", "11", B, A, 1),)), t)
    [r] = ir_terms(KernelIR(0, True, (Op("sub_swap", "11", A, B, 1),)), t)
    assert s == w != r
    cubic = [ir_terms(KernelIR(0, True, (Op(a, "33", *ab, 3),)), t)[0]
             for a in ("add", "mul") for ab in ((X, CH), (CH, X))]
    assert cubic[0] != cubic[1] and cubic[2] == cubic[3]


def test_the_plan_run_sees_a_clobbered_or_missing_slot() -> None:
    """Two chunks: v0 and v1 cross the cut. One slot for both (v1 written over v0 before chunk 1
    loads it), v1 not stored, or v0 not among chunk 1's loads: each is a wrong read."""
    ir = KernelIR(0, True, (Op("add", "11", A, B, 1), Op("sub", "11", A, B, 1), Op("mul", "11", A, A, 1),
                            Op("add", "11", Val(0, 1), Val(1, 1), 1)))
    good = Plan(2, ((0, 3), (3, 4)), {0: 0, 1: 1}, ((), (0, 1)), ((0, 1), ()), 2, 0)
    assert_same_words(ir, ir, good)
    for bad in (Plan(2, good.chunks, good.slot_of, ((), (1,)), good.stores, 2, 0),
                Plan(2, good.chunks, {0: 0, 1: 0}, good.loads, good.stores, 1, 0),
                Plan(2, good.chunks, good.slot_of, good.loads, ((0,), ()), 2, 0)):
        with pytest.raises(AssertionError):
            assert_same_words(ir, ir, bad)


def test_a_commutative_cse_fails_the_term_check(monkeypatch) -> None:
    """CSE keyed on the operands as a set (add treated as commutative) merges add(b, a) into
    add(a, b): the term check says so on the smallest IR that has both."""
    from codegen import passes
    ir = KernelIR(0, True, (Op("add", "11", A, B, 1), Op("add", "11", B, A, 1),
                            Op("sub", "11", Val(0, 1), Val(1, 1), 1)))
    assert optimize(ir)[1].cse_removed == 0
    check_kernel_source(ir, [], 0)
    real_key = passes._key
    monkeypatch.setattr(passes, "_key", lambda op: (*real_key(op)[:3], frozenset((op.a, op.b)))
                        if op.arith == "add" else real_key(op))
    assert optimize(ir)[1].cse_removed == 1
    with pytest.raises(AssertionError, match="term differs"):
        check_kernel_source(ir, [], 0)


# ------------------------------------------------------------------------------ random IRs (DAGs)
LEAVES1 = [Leaf("cm", 1, stage=1, col=k) for k in range(3)] + [Leaf("number", 1, value=7), Leaf("public", 1, col=0)]
LEAVES3 = [Leaf("cm", 3, stage=1, col=3), Leaf("challenge", 3, col=0), Leaf("challenge", 3, col=3)]


@st.composite
def mirrored_irs(draw, max_ops: int = 80) -> KernelIR:
    """Random Q IRs in which many ops repeat an earlier op, as it was or with its operands swapped
    (add(b, a) after add(a, b), sub(b, a), sub_swap(a, b), ...): the pairs a pass must keep apart
    or may merge."""
    n = draw(st.integers(2, max_ops))
    ops: list[Op] = []
    for i in range(n):
        if ops and draw(st.integers(0, 2)) == 0:
            o = ops[draw(st.integers(0, len(ops) - 1))]
            if o.b is not None and o.a.dim == o.b.dim and draw(st.booleans()):
                arith = draw(st.sampled_from(["add", "sub", "sub_swap", "mul", o.arith]))
                ops.append(Op(arith, o.shape, o.b, o.a, o.dim))
            else:
                ops.append(o)
            continue
        pool1 = LEAVES1 + [Val(j, 1) for j, o in enumerate(ops) if o.dim == 1][-6:]
        pool3 = LEAVES3 + [Val(j, 3) for j, o in enumerate(ops) if o.dim == 3][-6:]
        shape = draw(st.sampled_from(["11", "31", "33", "11", "1"]))
        arith = draw(st.sampled_from(["add", "sub", "sub_swap", "mul"]))
        if shape == "1":
            a = draw(st.sampled_from(pool1 + pool3))
            ops.append(Op("copy", "1" if a.dim == 1 else "3", a, None, a.dim))
            continue
        a = draw(st.sampled_from(pool3 if shape[0] == "3" else pool1))
        b = draw(st.sampled_from(pool3 if shape[1] == "3" else pool1))
        ops.append(Op(arith, shape, a, b, 3 if shape[0] == "3" else 1))
    return KernelIR(0, True, tuple(ops))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mirrored_irs(), st.integers(0, 24))
def test_passes_and_remat_keep_every_term_on_random_irs(ir: KernelIR, opc: int) -> None:
    o, _ = optimize(ir)
    assert_same_words(ir, o)
    ks = check_kernel_source(ir, [], opc)
    r = remat(o, plan(o, opc))
    assert_same_words(ir, r[0], r[1])
    assert ks.pass_stats.ops_in == len(ir.ops)


# ----------------------------------------------------------------------------------- real kernels
def _check_real(p) -> None:
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    if cov.q is None:
        assert cov.air_skip, p.base
        return
    n = len(cov.q.ops)
    for opc in sorted({0, 32, 128, -(-n // 8)}):
        ks = check_kernel_source(cov.q, cov.exprs, opc)
        assert (ks.plan.n_chunks > 1) == (0 < opc < n)


@pytest.mark.parametrize("p", kernel_params(SAMPLE))
def test_every_sample_kernel_keeps_its_terms_through_the_passes(p) -> None:
    _check_real(p)


@requires("pk")
@pytest.mark.parametrize("p", pk_params(kernel_params(PK)))
def test_every_pk_kernel_keeps_its_terms_through_the_passes(p) -> None:
    _check_real(p)


# ------------------------------------------------------------------------------------ end to end
SI = {
    "name": "Order", "airgroupId": 0, "airId": 0, "nStages": 2,
    "starkStruct": {"nBits": 3, "nBitsExt": 4},
    "cmPolsMap": [{"stage": 1, "dim": 1, "stagePos": i} for i in range(8)],
    "mapSectionsN": {"const": 0, "cm1": 8},
    "openingPoints": [0], "boundaries": [{"name": "everyRow"}], "nConstants": 0, "nPublics": 0,
    "challengesMap": [{"name": "alpha", "stage": 2, "dim": 3, "stageId": 0}],
    "evMap": [], "airValuesMap": [], "airgroupValuesMap": [], "proofValuesMap": [],
    "cExpId": 0, "qDim": 3,
}
N_EXT = 1024
C = [Leaf("cm", 1, stage=1, col=k) for k in range(8)]
X3, Y3 = Leaf("cm", 3, stage=1, col=2), Leaf("cm", 3, stage=1, col=5)
ALPHA = Leaf("challenge", 3, col=0)


def _order_q(value_path: bool) -> KernelIR:
    """Adds of both orders of the same operands (two columns; a cubic column and a challenge), then
    sums that carry the second one's raw words into the result: `add(x, y)` canonicalises x only,
    so y's raw word (v or v + p) is what the sum's word shows. With `value_path`, a 3x3 product
    too (the kernel then takes the value path: canon(v) stored where every component is >= EPS,
    the exact program elsewhere)."""
    ops = [Op("add", "11", C[0], C[1], 1),              # 0
           Op("add", "11", C[1], C[0], 1),              # 1: v0's operands swapped
           Op("add", "33", ALPHA, X3, 3),               # 2
           Op("add", "33", X3, ALPHA, 3),               # 3: v2's operands swapped
           Op("add", "11", Val(0, 1), Val(1, 1), 1),    # 4: canon(v0) + v1
           Op("add", "33", Val(2, 3), Val(3, 3), 3),    # 5: canon(v2) + v3
           Op("add", "31", Val(5, 3), Val(4, 1), 3)]    # 6
    if value_path:
        ops += [Op("mul", "33", Y3, Y3, 3),             # 7
                Op("add", "33", Val(7, 3), Val(6, 3), 3)]
    return KernelIR(0, True, tuple(ops))


#: the adds whose operand order the result's words must show (for the inputs below): the second of
#: each pair (what a CSE that took add as commutative would replace) and the sums that carry them
VISIBLE = {1, 3, 4, 5}


def _order_words(rng, n: int) -> np.ndarray:
    """Words that make an add's operand order visible: a third small values, a third small values
    plus p (their other encoding), a third uniform."""
    small = rng.integers(0, 1 << 20, size=n, dtype=np.uint64)
    kind = rng.integers(0, 3, size=n)
    return np.where(kind == 0, small, np.where(kind == 1, small + np.uint64(P),
                                               rng.integers(0, 1 << 64, size=n, dtype=np.uint64)))


def _oracle(ir: KernelIR, cols: np.ndarray, challenges: np.ndarray) -> np.ndarray:
    """The production words of `ir` op by op with the numpy oracle's op semantics
    (codegen.check.reference.apply_op)."""
    from codegen.check import reference as ref
    kind = {"11": ref.OPS_11, "31": ref.OPS_31, "33": ref.OPS_33}
    arith = {"add": ref.ARITH_ADD, "sub": ref.ARITH_SUB, "mul": ref.ARITH_MUL, "sub_swap": ref.ARITH_SUB_SWAP}
    n = cols.shape[1]

    def load(a, vals):
        if isinstance(a, Val):
            return vals[a.id]
        if a.kind == "challenge":
            return tuple(np.full(n, challenges[a.col + d], dtype=np.uint64) for d in range(a.dim))
        return tuple(cols[a.col + d] for d in range(a.dim))
    vals: list = []
    for op in ir.ops:
        vals.append(ref.apply_op(kind[op.shape], arith[op.arith], load(op.a, vals), load(op.b, vals)))
    out = vals[-1]
    return np.array(out if len(out) == 3 else (out[0], np.zeros(n, np.uint64), np.zeros(n, np.uint64)),
                    dtype=np.uint64)


def _draws(si, ir: KernelIR, launches: int = 4):
    """`launches` inputs: columns from _order_words, the challenge words alternately small values
    and small values plus p, and on a quarter of the rows Y3 = 0 (a small Q there: the value path
    runs the exact program on those rows)."""
    rng = np.random.default_rng(17)
    for k in range(launches):
        buf = hostcheck.make_buffers(si, N_EXT, 8, rng)
        cols = buf.aux[buf.off_ext[1]: buf.off_ext[1] + 8 * N_EXT].reshape(8, N_EXT)
        cols[:] = _order_words(rng, 8 * N_EXT).reshape(8, N_EXT)
        cols[5:8, ::4] = 0
        small = rng.integers(0, 1 << 20, size=3, dtype=np.uint64)
        buf.scalars["challenges"][:3] = small + np.uint64(P) * np.uint64(k % 2 == 0)
        yield buf, cols, _oracle(ir, cols, buf.scalars["challenges"])


@requires("gxx")
@pytest.mark.parametrize("value_path", [False, True], ids=["exact", "value-path"])
def test_adds_of_both_orders_end_to_end(value_path: bool) -> None:
    """The hand-made Q through the real emitter (the passes included) and g++, against the oracle
    over the IR as written, on four launches with fresh scalars; the inputs make every add's
    operand order visible (each add with its operands swapped changes the oracle's words, in
    every launch), so a pass that merged v1 into v0 or v4 into v3 would fail here."""
    si = parse_starkinfo(SI, "order.starkinfo.json")
    ir = _order_q(value_path)
    ks = KernelSource("order", ir, plan(ir, 0), [], "0123456789abcdef" * 4)
    files = render(ks)
    assert any("exps_fast_ok(" in t for t in files.values()) == value_path
    adds = [i for i, op in enumerate(ir.ops) if op.arith == "add"]
    with tempfile.TemporaryDirectory(prefix="exps-order-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(files, Path(d)))
        for buf, cols, want in _draws(si, ir):
            visible = set()      # the adds whose operand order these inputs show in the result
            for i in adds:
                op = ir.ops[i]
                swapped = KernelIR(0, True, ir.ops[:i] + (Op("add", op.shape, op.b, op.a, op.dim),) + ir.ops[i + 1:])
                if op.a.dim == op.b.dim and (_oracle(swapped, cols, buf.scalars["challenges"]) != want).any():
                    visible.add(i)
            assert visible >= VISIBLE, visible
            mem = hostcheck.HostMem()
            got = hostcheck.run_q(lib, buf, buf.bind(mem), mem, N_EXT)
            assert np.array_equal(got, want), hostcheck._first_diff(got, want)


@requires("gxx")
def test_a_commutative_cse_fails_end_to_end(monkeypatch) -> None:
    """The same Q compiled from a CSE that treats add as commutative: wrong raw words."""
    from codegen import passes
    real_key = passes._key
    monkeypatch.setattr(passes, "_key", lambda op: (*real_key(op)[:3], frozenset((op.a, op.b)))
                        if op.arith == "add" else real_key(op))
    si = parse_starkinfo(SI, "order.starkinfo.json")
    ir = _order_q(False)
    ks = KernelSource("order", ir, plan(ir, 0), [], "0123456789abcdef" * 4)
    assert ks.pass_stats.cse_removed == 2
    with tempfile.TemporaryDirectory(prefix="exps-order-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(render(ks), Path(d)))
        buf, _, want = next(_draws(si, ir))
        mem = hostcheck.HostMem()
        got = hostcheck.run_q(lib, buf, buf.bind(mem), mem, N_EXT)
    assert (got != want).any(axis=0).sum() > N_EXT // 8
