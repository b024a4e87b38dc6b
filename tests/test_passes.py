"""codegen.passes: CSE and dead code on the Q IR give the same words with fewer ops."""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from codegen.check import gl64
from codegen.check import hostcheck
from codegen.emit import KernelSource, render, x_parts
from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.coverage import cover
from codegen.model import load_air
from codegen.passes import cse, dce, optimize
from codegen.plan import plan
from codegen.remat import remat

from test_plan import kernel_irs

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
PK = ROOT.parent / "shared" / "pk"
C0, C1 = Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1, shift=1)
CH = Leaf("challenge", 3, col=3)
EDGE = [0, 1, 2, gl64.EPS, gl64.EPS + 1, gl64.P - 1, gl64.P, gl64.P + 1, (1 << 64) - 1, 1 << 63]


# ------------------------------------------------------------------ an IR evaluator (gl64 oracle)
def _apply(op: Op, a, b):
    """One op on word arrays, with the emitter's C mapping (emit.OP_C) spelled in gl64."""
    s = op.arith
    if s == "copy":
        return a
    if op.shape == "11":
        return {"add": lambda: gl64.add(a, b), "sub": lambda: gl64.sub(a, b), "mul": lambda: gl64.mul(a, b),
                "sub_swap": lambda: gl64.sub(b, a)}[s]()
    if op.shape == "31":
        return {"add": lambda: (gl64.add(a[0], b), a[1], a[2]), "sub": lambda: (gl64.sub(a[0], b), a[1], a[2]),
                "mul": lambda: gl64.mul31(a, b),
                "sub_swap": lambda: (gl64.sub(b, a[0]), gl64.neg(a[1]), gl64.neg(a[2]))}[s]()
    return {"add": lambda: gl64.add3(a, b), "sub": lambda: gl64.sub3(a, b), "mul": lambda: gl64.mul33(a, b),
            "sub_swap": lambda: gl64.sub3(b, a)}[s]()


def evaluate(ir: KernelIR, seed: int, n: int = 64):
    """The result words of `ir` over n rows; each leaf is a column of words drawn from the leaf
    itself (and the seed), so two IRs over the same leaves read the same words."""
    edge = np.array(EDGE, dtype=np.uint64)

    def col(rng):
        x = rng.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False)
        m = rng.random(n) < 0.4
        x[m] = edge[rng.integers(0, len(edge), size=int(m.sum()))]
        return x

    def arg(x, vals):
        if isinstance(x, Val):
            return vals[x.id]
        rng = np.random.default_rng([seed, zlib.crc32(repr(x).encode())])
        return col(rng) if x.dim == 1 else (col(rng), col(rng), col(rng))

    vals: list = []
    for op in ir.ops:
        vals.append(_apply(op, arg(op.a, vals), arg(op.b, vals) if op.b is not None else None))
    out = vals[-1]
    return np.stack(out) if isinstance(out, tuple) else out


# ------------------------------------------------------------------------------------- hand IRs
def test_cse_and_dce_by_hand() -> None:
    ops = (Op("mul", "11", C0, C1, 1),          # v0
           Op("mul", "11", C0, C1, 1),          # v1 = v0
           Op("mul", "11", C1, C0, 1),          # v2: operand order differs -> kept
           Op("add", "11", Val(1, 1), C0, 1),   # v3 -> add(v0, C0)
           Op("add", "11", Val(0, 1), C0, 1),   # v4 = v3 after renaming
           Op("sub", "11", Val(2, 1), C1, 1),   # v5: dead
           Op("mul", "11", Val(4, 1), Val(3, 1), 1))   # v6 = mul(v3, v3): the result
    ir = KernelIR(7, True, ops)
    c, nc = cse(ir)
    assert nc == 2
    assert c.ops == (ops[0], ops[2], Op("add", "11", Val(0, 1), C0, 1), Op("sub", "11", Val(1, 1), C1, 1),
                     Op("mul", "11", Val(2, 1), Val(2, 1), 1))
    d, nd = dce(c)
    assert nd == 2       # v5 (dead) and v2 (only v5 read it)
    assert d.ops == (ops[0], Op("add", "11", Val(0, 1), C0, 1), Op("mul", "11", Val(1, 1), Val(1, 1), 1))
    o, st = optimize(ir)
    assert o == d and st.summary() == {"ops_in": 7, "ops_out": 3, "cse": 2, "dce": 2}
    assert (o.exp_id, o.extended) == (7, True)
    assert np.array_equal(evaluate(o, 1), evaluate(ir, 1))


def test_result_op_is_kept_even_when_a_duplicate() -> None:
    ops = (Op("mul", "33", CH, CH, 3), Op("mul", "33", CH, CH, 3))
    o, st = optimize(KernelIR(0, True, ops))
    # the last op is the result the kernel stores: it stays, and the first (now dead) goes
    assert o.ops == (ops[1],) and (st.cse_removed, st.dce_removed) == (0, 1)


def test_nothing_to_do_is_identity() -> None:
    ir = KernelIR(0, True, (Op("mul", "11", C0, C1, 1), Op("add", "11", Val(0, 1), C0, 1)))
    o, st = optimize(ir)
    assert o == ir and st.ops_in == st.ops_out == 2


@settings(max_examples=150, deadline=None)
@given(kernel_irs())
def test_optimize_keeps_the_words(ir: KernelIR) -> None:
    o, st = optimize(ir)
    assert st.ops_in == len(ir.ops) and st.ops_out == len(o.ops) == st.ops_in - st.cse_removed - st.dce_removed
    # SSA, nothing dead, no duplicate left, the result last and of the same dim
    keys = set()
    for i, op in enumerate(o.ops):
        assert all(a.id < i for a in op.args() if isinstance(a, Val))
        keys.add((op.arith, op.shape, op.a, op.b))
    assert len(keys) == len(o.ops) or o.ops[-1] in o.ops[:-1]
    read = {a.id for op in o.ops for a in op.args() if isinstance(a, Val)}
    assert read | {len(o.ops) - 1} == set(range(len(o.ops)))
    assert o.out_dim == ir.out_dim
    assert np.array_equal(evaluate(o, 3), evaluate(ir, 3))
    assert optimize(o)[1].ops_out == len(o.ops)      # idempotent


# ------------------------------------------------------------------------------------- real AIRs
def _q(starkinfo: Path):
    si, ei = load_air(starkinfo, Path(str(starkinfo).replace(".starkinfo.json", ".expressionsinfo.json")))
    return si, ei, cover(si, ei)


NEEDS_PK = pytest.mark.requires("pk")
CONN_NEW = PK / "connection/provingKey/connection/Connection/airs/ConnectionNew/air/ConnectionNew.starkinfo.json"
REAL = [
    pytest.param(SAMPLE / "synth/Basic/airs/Large/air/Large.starkinfo.json", id="Large"),
    pytest.param(SAMPLE / "synth/Basic/airs/Medium/air/Medium.starkinfo.json", id="Medium"),
    pytest.param(CONN_NEW, id="ConnectionNew", marks=NEEDS_PK),
    pytest.param(PK / "intermediate_sums/provingKey/intermediate_sums/Intermediates/airs/Intermediates/air/"
                 "Intermediates.starkinfo.json", id="Intermediates", marks=NEEDS_PK),
]


def assert_no_duplicate_and_no_dead_op(o: KernelIR) -> None:
    """What the passes promise of their output: no op equal to an earlier one (same arith, shape
    and operands, in order), other than the result; every value but the result read."""
    keys = [(op.arith, op.shape, op.a, op.b) for op in o.ops]
    assert len(set(keys[:-1])) == len(keys) - 1, "an op equal to an earlier one is left"
    read = {a.id for op in o.ops for a in op.args() if isinstance(a, Val)}
    assert read | {len(o.ops) - 1} == set(range(len(o.ops))), "a dead op is left"


@pytest.mark.parametrize("si_path", REAL)
def test_passes_on_real_airs(si_path: Path) -> None:
    """On real Qs: the counts add up, nothing equal or dead is left (so CSE merged every repeat
    the lowering made, ConnectionNew's and Intermediates' sums of fractions among them), the words
    are the same (the operand-order term check: tests/test_operand_order.py), and a second run
    finds nothing to do."""
    from test_operand_order import assert_same_words
    _, _, cov = _q(si_path)
    o, st = optimize(cov.q)
    assert (st.ops_in, st.ops_out) == (len(cov.q.ops), len(o.ops))
    assert st.ops_out == st.ops_in - st.cse_removed - st.dce_removed
    assert_no_duplicate_and_no_dead_op(o)
    repeats = len({(op.arith, op.shape, op.a, op.b) for op in cov.q.ops}) < len(cov.q.ops)
    assert st.cse_removed > 0 or not repeats
    assert_same_words(cov.q, o)
    assert np.array_equal(evaluate(o, 5, 32), evaluate(cov.q, 5, 32))
    assert optimize(o)[1].ops_out == len(o.ops)


@NEEDS_PK
def test_kernel_source_replans_the_optimized_ir() -> None:
    _, _, cov = _q(CONN_NEW)
    ks = KernelSource("k", cov.q, plan(cov.q, 64), [], "0" * 64)
    o, _ = optimize(cov.q)
    assert ks.q_in is cov.q and ks.pass_stats.ops_out == len(o.ops) < len(cov.q.ops)
    # as many chunks as before the passes (10 of 64 ops), of ceil(ops / 10) ops each; then the
    # leaf-only values that cross a cut (3x1 products of a challenge and a column) recomputed where
    # they are read (codegen.remat): fewer scratch slots
    n = plan(cov.q, 64).n_chunks
    pk = plan(o, -(-len(o.ops) // n))
    assert (ks.q, ks.plan, ks.remat_copies) == remat(o, pk) and ks.remat_copies > 0
    assert len(ks.q.ops) == len(o.ops) + ks.remat_copies and ks.plan.n_chunks == n == 10
    assert ks.plan.total_slots < pk.total_slots
    off = KernelSource("k", cov.q, plan(cov.q, 64), [], "0" * 64, passes=False)
    assert off.q is cov.q and off.plan.n_chunks == 10 and off.pass_stats is None
    table = render(ks)["k_abi.cpp"]
    assert f"10ull, {ks.plan.total_slots}ull, {ks.plan.min_scratch}ull, EXPS_SINGLE_SHAPE" in table
    assert re.search(r"k[0-9a-f]{16}_q_c9_kPK", table) and "_q_c10_" not in table


@pytest.mark.requires("gxx", "pk")
@pytest.mark.parametrize("opc", [0, 64])
def test_host_check_connection_new_after_passes(opc: int, tmp_path: Path) -> None:
    """The optimized kernel, built as host C++, against the numpy oracle of the JSON."""
    import json
    si_path = CONN_NEW
    si, ei, cov = _q(si_path)
    ks = hostcheck.kernel_source("k_cn", cov, opc)
    assert ks.pass_stats.ops_out < len(cov.q.ops) and ks.plan.n_chunks == (10 if opc else 1)
    lib = hostcheck._load(hostcheck.build_host_library(render(ks), tmp_path))
    res = hostcheck.check_kernel(si, json.loads(si_path.read_text()),
                                 json.loads(Path(str(si_path).replace(".starkinfo.json", ".expressionsinfo.json"))
                                            .read_text()), ks, lib, seed=11)
    assert res.mismatches == [] and res.q_words > 0


EXPR_PASSES = [  # (AIR, whether some expression of it repeats an op or has a dead one)
    pytest.param(PK / "intermediate_sums/provingKey/intermediate_sums/Intermediates/airs/Intermediates/air/"
                 "Intermediates.starkinfo.json", True, id="Intermediates", marks=NEEDS_PK),
    pytest.param(PK / "range_check/provingKey/range_check/RangeCheck4/airs/RangeCheck4/air/RangeCheck4.starkinfo.json",
                 True, id="RangeCheck4", marks=NEEDS_PK),
    pytest.param(SAMPLE / "synth/Basic/airs/Medium/air/Medium.starkinfo.json", False, id="Medium"),
]


def _optimizable(ir: KernelIR) -> bool:
    """An op equal to an earlier one, or a dead one: what the passes remove."""
    try:
        assert_no_duplicate_and_no_dead_op(ir)
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize("si_path,some", EXPR_PASSES)
def test_expressions_go_through_the_passes(si_path: Path, some: bool) -> None:
    """Each trace-domain expression is optimized as Q is (KernelSource.__post_init__):
    Intermediates' sums of fractions add a challenge to the same column up to 7 times in one
    expression; after the passes each such sum is computed once (no op equal to an earlier one is
    left, and the emitted body has no two equal right-hand sides), an expression changes exactly
    when it had something to remove, and every expression's words are the bytecode's (the term
    check of tests/test_operand_order.py and an evaluation). With passes=False they are emitted as
    lowered."""
    from test_operand_order import assert_same_words
    _, _, cov = _q(si_path)
    ks = KernelSource("k", cov.q, plan(cov.q, 0), cov.exprs, "0" * 64)
    off = KernelSource("k", cov.q, plan(cov.q, 0), cov.exprs, "0" * 64, passes=False)
    assert [x.ir.exp_id for x in ks.exprs] == [x.ir.exp_id for x in cov.exprs]
    assert [x.ir for x in off.exprs] == [x.ir for x in cov.exprs]
    assert any(_optimizable(y.ir) for y in cov.exprs) == some
    for x, y in zip(ks.exprs, cov.exprs):
        assert (x.num1, x.inv) == (y.num1, y.inv)
        assert (x.ir != y.ir) == _optimizable(y.ir)
        assert_no_duplicate_and_no_dead_op(x.ir)
        assert_same_words(y.ir, x.ir)
        assert np.array_equal(evaluate(x.ir, 3, 32), evaluate(y.ir, 3, 32)), x.ir.exp_id
    for d in x_parts(ks):
        rhs = [ln.split(" = ", 1)[1] for ln in d["lines"] if ln.startswith("const ") and " = " in ln
               and not ln.startswith("const char*")]
        assert len(rhs) == len(set(rhs)), d["exp_id"]
