"""codegen.remat: cheap values that cross a chunk cut recomputed where they are read.
Cheap: not a 3x3 product, and every operand a leaf or itself cheap, remat.DEPTH (1) ops deep at most.

By hand: what is recomputed, what stays stored, what goes. Property: on random IRs and chunkings
the rewritten IR computes the same words (the gl64 evaluator of tests/test_passes.py), its plan
covers the same chunks, no recomputable value is loaded from scratch, and the emitted protocol
(test_plan.simulate) never reads a clobbered slot. The end-to-end host check of random AIRs
(test_emit.test_random_dags_bit_identical) and of every real Q (test_hostcheck) runs it too."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.plan import plan, plan_chunks
from codegen.remat import recomputable, remat
from codegen import remat as remat_mod
from codegen.remat import DEPTH
from codegen.remat import depths as remat_depths
from test_passes import evaluate
from test_plan import kernel_irs, simulate

C0, C1 = Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1, shift=1)
CH = Leaf("challenge", 3, col=3)
X3 = Leaf("cm", 3, stage=2, col=0)


def _two_chunks(ops) -> tuple[KernelIR, object]:
    ir = KernelIR(7, True, tuple(ops))
    return ir, plan_chunks(ir, 3, ((0, 3), (3, len(ops))))


def _depth_two_example():
    return _two_chunks([
        Op("add", "11", C0, C1, 1),                  # v0: depth 1, chunk 0 reads it too
        Op("mul", "33", CH, X3, 3),                  # v1: a 3x3 product -> stays stored
        Op("mul", "11", Val(0, 1), C0, 1),           # v2: depth 2 (over v0) -> recomputed with v0
        Op("mul", "31", Val(1, 3), Val(0, 1), 3),    # v3 (chunk 1): reads v0 and v1
        Op("add", "31", Val(3, 3), Val(2, 1), 3),    # v4: reads v2
        Op("mul", "31", Val(4, 3), Val(0, 1), 3),    # v5: v0 again (one copy per chunk)
    ])


def test_by_hand_depth_one_recomputes_leaf_only_values() -> None:
    ir, pl = _depth_two_example()
    assert DEPTH == 1 and sorted(pl.loads[1]) == [0, 1, 2] and remat_depths(ir) == [1, 0, 2, 0, 0, 0]
    out, pl2, copies = remat(ir, pl)
    assert copies == 1
    assert out.ops[:3] == ir.ops[:3] and out.ops[3] == ir.ops[0]      # chunk 1 starts with v0's copy
    assert out.ops[4] == Op("mul", "31", Val(1, 3), Val(3, 1), 3)
    assert out.ops[6] == Op("mul", "31", Val(5, 3), Val(3, 1), 3)
    assert pl2.chunks == ((0, 3), (3, 7)) and sorted(pl2.loads[1]) == [1, 2] and sorted(pl2.stores[0]) == [1, 2]
    assert np.array_equal(evaluate(out, 5), evaluate(ir, 5))


def test_by_hand_depth_two_recomputes_the_operands_too(monkeypatch) -> None:
    monkeypatch.setattr(remat_mod, "DEPTH", 2)
    ir, pl = _depth_two_example()
    out, pl2, copies = remat(ir, pl)
    assert copies == 2
    # chunk 0 keeps v0 (v2 reads it there), v1 (stored); v2 only chunk 1 reads: it moves there
    assert out.ops[:2] == ir.ops[:2]
    assert out.ops[2] == ir.ops[0]                                   # chunk 1: v0's copy
    assert out.ops[3] == Op("mul", "31", Val(1, 3), Val(2, 1), 3)
    assert out.ops[4] == Op("mul", "11", Val(2, 1), C0, 1)           # v2's copy, over the copy of v0
    assert out.ops[5] == Op("add", "31", Val(3, 3), Val(4, 1), 3)
    assert out.ops[6] == Op("mul", "31", Val(5, 3), Val(2, 1), 3)
    assert pl2.chunks == ((0, 2), (2, 7))
    assert pl2.loads[1] == (1,) and pl2.stores[0] == (1,)
    assert pl2.total_slots < pl.total_slots
    assert np.array_equal(evaluate(out, 5), evaluate(ir, 5))


def test_values_over_a_stored_value_stay_stored() -> None:
    ir, pl = _two_chunks([
        Op("mul", "33", CH, X3, 3),                  # v0: stored
        Op("add", "33", Val(0, 3), CH, 3),           # v1: over v0 -> depth 0: stored too
        Op("mul", "11", C0, C1, 1),                  # v2
        Op("mul", "31", Val(1, 3), Val(2, 1), 3),    # v3 (chunk 1)
    ])
    out, pl2, copies = remat(ir, pl)
    assert copies == 1 and pl2.loads[1] == (1,)      # v1 loaded; v2 (depth 1) recomputed
    assert np.array_equal(evaluate(out, 2), evaluate(ir, 2))


def test_a_value_only_later_chunks_read_goes_with_its_store() -> None:
    ir, pl = _two_chunks([
        Op("sub", "11", C0, C1, 1),                  # v0: nothing in chunk 0 reads it
        Op("mul", "33", CH, X3, 3),                  # v1: stored
        Op("add", "33", Val(1, 3), CH, 3),           # v2: over v1: stored
        Op("mul", "31", Val(2, 3), Val(0, 1), 3),    # v3 (chunk 1)
    ])
    out, pl2, copies = remat(ir, pl)
    assert copies == 1 and len(out.ops) == 4          # v0 moved, not copied
    assert out.ops[:2] == (ir.ops[1], Op("add", "33", Val(0, 3), CH, 3))
    assert out.ops[2] == ir.ops[0] and pl2.chunks == ((0, 2), (2, 4))
    assert pl2.loads[1] == (1,) and pl2.stores[0] == (1,)
    assert np.array_equal(evaluate(out, 9), evaluate(ir, 9))


def test_a_chunk_that_would_be_empty_keeps_its_values_stored() -> None:
    ir, pl = _two_chunks([
        Op("add", "11", C0, C1, 1),
        Op("mul", "11", C0, C1, 1),
        Op("sub", "11", C1, C0, 1),                  # chunk 0: three cheap values, all read later
        Op("mul", "11", Val(0, 1), Val(1, 1), 1),
        Op("add", "11", Val(3, 1), Val(2, 1), 1),
    ])
    assert remat(ir, pl) == (ir, pl, 0)


def test_single_kernel_and_nothing_cheap_are_identity() -> None:
    ir = KernelIR(1, True, (Op("add", "11", C0, C1, 1), Op("mul", "11", Val(0, 1), C0, 1)))
    assert remat(ir, plan(ir, 0)) == (ir, plan(ir, 0), 0)
    ir2, pl2 = _two_chunks([Op("mul", "33", CH, X3, 3), Op("add", "33", Val(0, 3), CH, 3),
                            Op("mul", "33", Val(1, 3), X3, 3), Op("mul", "33", Val(0, 3), Val(2, 3), 3)])
    assert remat(ir2, pl2) == (ir2, pl2, 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel_irs(max_ops=120), st.integers(1, 40))
def test_remat_keeps_the_words_and_the_chunks(ir: KernelIR, k: int) -> None:
    pl = plan(ir, k)
    out, pl2, copies = remat(ir, pl)
    assert pl2.n_chunks == pl.n_chunks and pl2.ops_per_chunk == pl.ops_per_chunk
    assert pl2 == plan_chunks(out, pl.ops_per_chunk, pl2.chunks)
    assert out.ops[-1].dim == ir.ops[-1].dim
    assert all(a.id < i for i, op in enumerate(out.ops) for a in op.args() if isinstance(a, Val))
    assert np.array_equal(evaluate(out, 11), evaluate(ir, 11))
    simulate(out, pl2)
    if copies:
        # no recomputable value is loaded, unless recomputing it would have emptied its chunk
        chunk_of = [c for c, (s, e) in enumerate(pl2.chunks) for _ in range(s, e)]
        rec = recomputable(out)
        for v in {v for ch in pl2.loads for v in ch if rec[v]}:
            s, e = pl2.chunks[chunk_of[v]]
            assert all(rec[i] for i in range(s, e))
        assert sum(out.ops[v].dim for ch in pl2.loads for v in ch) < sum(ir.ops[v].dim for ch in pl.loads for v in ch)
    else:
        assert (out, pl2) == (ir, pl)
