"""The Q kernels' value path (docs/DESIGN-value-path.md, codegen/program.py): value-only
arithmetic, canon(v) stored where every output component is >= EPS, the exact program for the
other rows.

The plain host check (tests/test_hostcheck.py) runs both paths: its inputs give Q = 0 on the rows
whose zerofier-inverse word is 0 or p, and there the production words are often p, not 0. Here:
every Q of the sample and ../shared/pk with EVERY row through the exact program
(-DEXPS_FORCE_EXACT) against the oracle, so each op of each program is checked, not only the last
one (Q = x * zi); the program's layout; and mutants of each part, which these checks catch."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from codegen.check import hostcheck
from codegen.check.hostcheck import check_kernel
from codegen.coverage import cover
from codegen.discover import discover, kernels
from codegen.emit import render
from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.model import load_air
from codegen.plan import plan
from codegen.program import ADD, COPY, KINDS, MUL, NEG, SUB, exact_program
from require import PK, pk_params, requires

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "provingkey-sample"


def _kernels(root: Path) -> list:
    """One parameter per kernel key with a Q: (key, first placement)."""
    if not root.is_dir():
        return []
    out = []
    for pk in ([root] if (root / "synth").exists() else sorted(root.glob("*/provingKey"))):
        for key, ps in sorted(kernels(discover(pk)).items()):
            if ps[0].base == "Skipped":       # the sample's AIR without a kernel (tests/test_hostcheck.py)
                continue
            out.append(pytest.param(ps[0], id=f"{pk.parent.name if pk.name == 'provingKey' else 'sample'}-{ps[0].base}"))
    return out


def _check_exact(p, opc: int | None = None) -> tuple:
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    if cov.q is None:
        pytest.skip(f"{p.base}: no Q kernel ({cov.air_skip})")
    ks = hostcheck.kernel_source(p.key, cov, opc)
    with tempfile.TemporaryDirectory(prefix="exps-exact-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(render(ks), Path(d), defines=("-DEXPS_FORCE_EXACT",)))
        res = check_kernel(si, json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text()),
                           ks, lib, q_only=True)
    return res, ks


@pytest.mark.parametrize("p", _kernels(SAMPLE))
def test_every_sample_q_row_through_the_exact_program(p) -> None:
    res, ks = _check_exact(p)
    assert res.mismatches == [] and res.q_words > 0


@requires("pk")
@pytest.mark.parametrize("p", pk_params(_kernels(PK)))
def test_every_pk_q_row_through_the_exact_program(p) -> None:
    res, ks = _check_exact(p)
    assert res.mismatches == [] and res.q_words > 0


@requires("pk")
def test_every_q_with_a_3x3_product_takes_the_value_path() -> None:
    """The rule (emit.VALUE_MIN_MUL33 = 1, emitter 0.13.0): a Q with a 3x3 product is emitted with
    value-only products and the exact fallback; one without (the 3-op Test AIR) keeps its exact
    text. Counted over every kernel of ../shared/pk and the sample, by what the TUs contain."""
    took, exact = set(), set()
    for p in [q.values[0] for q in _kernels(SAMPLE) + _kernels(PK)]:
        si, ei = load_air(p.starkinfo, p.expressions)
        cov = cover(si, ei)
        ks = hostcheck.kernel_source(p.key, cov)
        text = "".join(t for n, t in render(ks).items() if n.endswith(".cu"))
        products = sum(1 for op in ks.q.ops if (op.arith, op.shape) == ("mul", "33"))
        assert ("exps_q_exact(A," in text) == (products > 0), p.base
        assert ("gl3_mul_v(" in text or "gl3_acc_mul(" in text) == (products > 0), p.base
        assert "gl3_mul(" not in text.split("#ifdef __CUDACC__")[0] or products == 0, p.base
        (took if products else exact).add(p.base)
    assert exact == {"Test"}
    assert {"U8Air", "U16Air", "Air1", "Tiny", "Connection1", "Large"} <= took


def test_chunked_exact_program_keeps_cross_chunk_values_in_their_slots() -> None:
    """Shared in 64-op chunks: the program writes the values that cross a cut to their scratch
    slots and reads them back there, every row through it, three scratch sizes (many waves)."""
    [p] = [p for p in discover(SAMPLE) if p.base == "Shared"][:1]
    res, ks = _check_exact(p, 64)
    assert ks.plan.n_chunks == 3 and ks.plan.total_slots > 0
    assert res.mismatches == []
    prog = exact_program(ks.q, ks.plan)
    slots = {dst for op, dk, dst, a, b in prog.ops if dk == KINDS["slot"]}
    assert slots == {s + d for v, s in ks.plan.slot_of.items() for d in range(ks.q.ops[v].dim)}


def _cm(col: int, dim: int = 1, shift: int = 0) -> Leaf:
    return Leaf("cm", dim, stage=1, col=col, shift=shift)


def test_program_lowers_each_op_to_the_base_ops_of_the_exact_forms() -> None:
    """One op of each kind: the base ops the header's exact forms are made of, in their order."""
    a3, b3, x1 = _cm(0, 3), _cm(3, 3, shift=1), _cm(6)
    ops = [Op("mul", "33", a3, b3, 3),          # 0: gl3_mul: 6 adds, 3 products, G, 3 products, 7 combines
           Op("sub_swap", "31", Val(0, 3), x1, 3),   # 1: gl3_rsub31: sub, neg, neg
           Op("add", "31", Val(1, 3), Leaf("number", 1, value=5), 3),   # 2: add + 2 copies
           Op("sub_swap", "11", x1, Leaf("zi", 1), 1),                  # 3: zi - x
           Op("mul", "31", Val(2, 3), Val(3, 1), 3)]                     # 4: the result
    ir = KernelIR(exp_id=1, extended=True, ops=tuple(ops))
    prog = exact_program(ir, plan(ir, 0))
    kinds = [op for op, *_ in prog.ops]
    assert kinds == [ADD] * 6 + [MUL] * 3 + [SUB] + [MUL] * 3 + [ADD, SUB, ADD, SUB, SUB, SUB, SUB] \
        + [SUB, NEG, NEG] + [ADD, COPY, COPY] + [SUB] + [MUL] * 3
    # operands: cm words carry column + component and the shift; the swap reads b first
    assert prog.ops[0][3] == (KINDS["cm"], 1, 0, 0) and prog.ops[0][4] == (KINDS["cm"], 1, 0, 1)
    assert prog.ops[3][3] == (KINDS["cm"], 1, 1, 3) and prog.ops[3][4] == (KINDS["cm"], 1, 1, 4)
    assert prog.ops[26][3] == (KINDS["zi"], 0, 0, 0) and prog.ops[26][4] == (KINDS["cm"], 1, 0, 6)
    assert prog.ops[23][4] == (KINDS["number"], 0, 0, 5)
    # every word is written before it is read, and the result's words are live locals at the end
    written: set[int] = set()
    for op, dk, dst, a, b in prog.ops:
        for x in (a, b):
            if x[0] == KINDS["local"]:
                assert x[3] in written
        written.add(dst)
    assert [w[0] for w in prog.result] == [KINDS["local"]] * 3
    assert prog.local_words <= 3 + 3 + 17      # a value, its successor, gl3_mul's temporaries


def test_program_refuses_what_it_cannot_load() -> None:
    ir = KernelIR(1, True, (Op("add", "11", Leaf("bogus", 1), Leaf("number", 1, value=1), 1),))
    with pytest.raises(ValueError, match="bogus"):
        exact_program(ir, plan(ir, 0))
    ir = KernelIR(1, True, (Op("add", "11", Leaf("number", 1, value=1 << 64), Leaf("number", 1, value=1), 1),))
    with pytest.raises(ValueError, match="out of range"):
        exact_program(ir, plan(ir, 0))
