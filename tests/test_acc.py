"""Accumulators on the value path (docs/DESIGN-value-path.md): a dim-3 product,
add or sub read once, by an add or sub of the same chunk, stays three accumulators (gl3_acc) and
only the last add or sub of such a tree reduces them.

Checked here: the device PTX of the accumulator primitives through codegen.check.ptxsim (value
identities on every edge pair and a mix of words), which values emit keeps as accumulators and the
exact lines it writes for them, a property test over random chunked IRs (every op emitted once, in
order; each accumulator read once, in its chunk, by an add or sub; bounds), and mutants of every
gl3_acc form in a real kernel's text, each of which the host check must catch."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bench.fieldops import EDGE, random_words
from codegen import emit, render_model
from bench import compound_ptx
from codegen.check import gl64, hostcheck, ptxsim
from codegen.check.gl64 import P
from codegen.check.hostcheck import check_kernel
from codegen.coverage import cover
from codegen.discover import discover
from codegen.emit import chunk_body, render
from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.model import load_air
from codegen.plan import plan_chunks
from codegen.render_model import ACC_HI_BOUND, acc_values, single_users

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "templates" / "gen_common.cuh"
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def _s32(h: int) -> int:
    return h - (1 << 32) if h >> 31 else h


# ------------------------------------------------------------------ the PTX of the primitives
def _acc_mul(a: int, b: int) -> tuple[int, int]:
    return tuple(ptxsim.run_all(ptxsim.extract(HEADER, "gl_acc_mul"), {"a": a, "b": b}))


def _pairs(n: int = 2000) -> list[tuple[int, int]]:
    rng = np.random.default_rng(20261202)
    xs, ys = (random_words(rng, n).tolist() for _ in range(2))
    return [(a, b) for a in EDGE for b in EDGE] + list(zip(xs, ys))


def test_gl_acc_mul_ptx_is_the_product_with_hi_in_minus_one_to_one() -> None:
    for a, b in _pairs():
        lo, hi = _acc_mul(a, b)
        assert _s32(hi) in (-1, 0, 1), (a, b, hi)
        assert (lo + _s32(hi) * (1 << 64) - a * b) % P == 0, (a, b)


@pytest.mark.parametrize("func,sign", [("gl_acc_add", 1), ("gl_acc_sub", -1)])
def test_gl_acc_add_sub_ptx_are_exact_integer_sums(func: str, sign: int) -> None:
    """lo + hi 2^64 of the result is x + y (x - y) exactly, as integers: no reduction at all."""
    asm = ptxsim.extract(HEADER, func)
    his = [0, 1, -1, 9, -9, ACC_HI_BOUND, -ACC_HI_BOUND]
    for (xl, yl), xh, yh in zip(_pairs(700), his * 1000, list(reversed(his)) * 1000):
        lo, hi = ptxsim.run_all(asm, {"x.lo": xl, "y.lo": yl, "x.hi": xh & M32, "y.hi": yh & M32})
        x, y = xl + xh * (1 << 64), yl + yh * (1 << 64)
        assert lo + _s32(hi) * (1 << 64) == x + sign * y, (func, xl, xh, yl, yh)


def test_gl_acc_red_ptx_reduces_every_bound_the_emitter_allows() -> None:
    asm = ptxsim.extract(HEADER, "gl_acc_red")
    limit = (1 << 30) - 1
    his = [0, 1, -1, 2, -2, 9, -9, ACC_HI_BOUND, -ACC_HI_BOUND, 2 * ACC_HI_BOUND + 1,
           -(2 * ACC_HI_BOUND + 1), limit, -limit]
    for lo in list(EDGE) + random_words(np.random.default_rng(7), 500).tolist():
        for h in his:
            [r] = ptxsim.run_all(asm, {"x.lo": lo, "x.hi": h & M32})
            assert 0 <= r <= M64 and (r - lo - h * (1 << 64)) % P == 0, (lo, h)


def test_the_compound_forms_are_the_generated_block() -> None:
    """The one-statement device forms in the header are exactly what bench/compound_ptx.py
    writes (nobody edits that PTX by hand)."""
    assert compound_ptx.in_header() == compound_ptx.render()


def _acc3(v: str, comps: list[tuple[int, int]]) -> dict[str, int]:
    """ptxsim's input values of a gl3_acc operand `v` from its three (lo, hi)."""
    return {k: x for d, (lo, hi) in enumerate(comps) for k, x in ((f"{v}.c{d}.lo", lo), (f"{v}.c{d}.hi", hi))}


def _prim(func: str, **values) -> list[int]:
    return ptxsim.run_all(ptxsim.extract(HEADER, func), values)


def _acc_inputs(n: int = 300):
    rng = np.random.default_rng(99)
    words = list(EDGE) + random_words(rng, n).tolist()
    his = [0, 1, 0xFFFFFFFF, 9, (-9) & M32, 5]
    for k in range(n):
        yield words[k % len(words)], his[k % len(his)], words[(7 * k + 3) % len(words)], his[(k + 2) % len(his)]


def test_gl3_acc_mul_ptx_is_its_primitives() -> None:
    asm = ptxsim.extract(HEADER, "gl3_acc_mul_ptx")
    rng = np.random.default_rng(5)
    ws = list(EDGE) + random_words(rng, 200).tolist()
    for k in range(250):
        a = [ws[(k + j) % len(ws)] for j in range(3)]
        b = [ws[(3 * k + 5 * j + 1) % len(ws)] for j in range(3)]
        A01, A02, A12 = ws[(k + 11) % len(ws)], ws[(k + 13) % len(ws)], ws[(k + 17) % len(ws)]
        B01, B02, B12 = ws[(k + 19) % len(ws)], ws[(k + 23) % len(ws)], ws[(k + 29) % len(ws)]
        got = ptxsim.run_all(asm, {"a.v0": a[0], "a.v1": a[1], "a.v2": a[2], "b.v0": b[0], "b.v1": b[1],
                                   "b.v2": b[2], "A01": A01, "A02": A02, "A12": A12, "B01": B01, "B02": B02,
                                   "B12": B12})
        D, E, F = (_prim("gl_acc_mul", a=a[j], b=b[j]) for j in range(3))
        R0, R1, R2 = _prim("gl_acc_mul", a=A12, b=B12), _prim("gl_acc_mul", a=A01, b=B01), _prim("gl_acc_mul", a=A02, b=B02)

        def add(x, y):
            return _prim("gl_acc_add", **{"x.lo": x[0], "y.lo": y[0], "x.hi": x[1], "y.hi": y[1]})

        def sub(x, y):
            return _prim("gl_acc_sub", **{"x.lo": x[0], "y.lo": y[0], "x.hi": x[1], "y.hi": y[1]})
        G = sub(D, E)
        want = [*sub(add(R0, G), F), *sub(sub(sub(add(R1, R0), E), E), D), *sub(R2, G)]
        assert got == want, k


def test_gl3_acc_mul31_ptx_is_its_primitives() -> None:
    asm = ptxsim.extract(HEADER, "gl3_acc_mul31_ptx")
    ws = list(EDGE) + random_words(np.random.default_rng(6), 200).tolist()
    for k in range(250):
        a, b = [ws[(k + j) % len(ws)] for j in range(3)], ws[(5 * k + 3) % len(ws)]
        got = ptxsim.run_all(asm, {"a.v0": a[0], "a.v1": a[1], "a.v2": a[2], "b": b})
        assert got == [w for j in range(3) for w in _prim("gl_acc_mul", a=a[j], b=b)], k


@pytest.mark.parametrize("op", ["add", "sub"])
def test_gl3_acc_addsub_ptx_is_its_primitives(op: str) -> None:
    asm = ptxsim.extract(HEADER, f"gl3_acc_{op}_ptx")
    rows = list(_acc_inputs())
    for k in range(0, len(rows) - 3):
        x, y = rows[k:k + 3], rows[k + 1:k + 4]
        got = ptxsim.run_all(asm, {**_acc3("x", [(r[0], r[1]) for r in x]), **_acc3("y", [(r[2], r[3]) for r in y])})
        want = [w for d in range(3) for w in _prim(f"gl_acc_{op}", **{"x.lo": x[d][0], "y.lo": y[d][2],
                                                                       "x.hi": x[d][1], "y.hi": y[d][3]})]
        assert got == want, (op, k)


def test_gl3_acc_red_ptx_is_its_primitives() -> None:
    asm = ptxsim.extract(HEADER, "gl3_acc_red_ptx")
    assert asm.outputs == ["r.v0", "r.v1", "r.v2"] and '"=&l"(r.v0)' in compound_ptx.in_header()
    rows = list(_acc_inputs())
    for k in range(len(rows) - 3):
        x = rows[k:k + 3]
        got = ptxsim.run_all(asm, _acc3("x", [(r[0], r[1]) for r in x]))
        assert got == [_prim("gl_acc_red", **{"x.lo": x[d][0], "x.hi": x[d][1]})[0] for d in range(3)], k


def test_gl3_mul_ptx_is_the_exact_product() -> None:
    """The exact 3x3 product's one-statement PTX gives the oracle's words (gl64.s_mul33: the
    interpreter's op order) on edge triples and a mix, over the operand sums gl3_mul computes."""
    asm = ptxsim.extract(HEADER, "gl3_mul_ptx")
    ws = list(EDGE) + random_words(np.random.default_rng(8), 300).tolist()
    for k in range(400):
        a = [ws[(k + j) % len(ws)] for j in range(3)]
        b = [ws[(7 * k + 3 * j + 2) % len(ws)] for j in range(3)]
        sums = {"A01": gl64.s_add(a[0], a[1]), "A02": gl64.s_add(a[0], a[2]), "A12": gl64.s_add(a[1], a[2]),
                "B01": gl64.s_add(b[0], b[1]), "B02": gl64.s_add(b[0], b[2]), "B12": gl64.s_add(b[1], b[2])}
        got = ptxsim.run_all(asm, {"a.v0": a[0], "a.v1": a[1], "a.v2": a[2], "b.v0": b[0], "b.v1": b[1],
                                   "b.v2": b[2], **sums, "K1": 1, "KE": M32})
        assert tuple(got) == tuple(gl64.s_mul33(tuple(a), tuple(b))), (a, b)


def test_gl3_mul31_ptx_is_the_exact_product() -> None:
    asm = ptxsim.extract(HEADER, "gl3_mul31_ptx")
    ws = list(EDGE) + random_words(np.random.default_rng(9), 300).tolist()
    for k in range(400):
        a, b = [ws[(k + j) % len(ws)] for j in range(3)], ws[(11 * k + 5) % len(ws)]
        got = ptxsim.run_all(asm, {"a.v0": a[0], "a.v1": a[1], "a.v2": a[2], "b": b})
        assert got == [gl64.s_mul(x, b) for x in a], (a, b)


def test_a_shadowed_register_is_refused() -> None:
    with pytest.raises(ValueError, match="shadow an outer register"):
        compound_ptx._check_scopes([".reg .u64 t;", "{", ".reg .u32 a0, t;", "}"])


# ------------------------------------------------------------------ what emit keeps, exactly
def _cm(col: int) -> Leaf:
    return Leaf("cm", 3, stage=2, col=3 * col)


def _small_ir() -> KernelIR:
    """(x0 * x1 + x2) - (x3 * c) + x4 * x5 * x6 (v4 is read twice: a word), c a base word."""
    c = Leaf("cm", 1, stage=1, col=0)
    return KernelIR(1, True, (
        Op("mul", "33", _cm(0), _cm(1), 3),         # 0 -> acc (read by 1)
        Op("add", "33", Val(0, 3), _cm(2), 3),      # 1 -> acc (read by 3)
        Op("mul", "31", _cm(3), c, 3),              # 2 -> acc (read by 3)
        Op("sub", "33", Val(1, 3), Val(2, 3), 3),   # 3 -> acc (read by 6)
        Op("mul", "33", _cm(4), _cm(5), 3),         # 4: read twice -> word
        Op("mul", "33", Val(4, 3), Val(4, 3), 3),   # 5 -> acc (read by 6)
        Op("add", "33", Val(3, 3), Val(5, 3), 3),   # 6: the result -> reduced
    ))


def test_acc_values_of_a_small_ir() -> None:
    ir = _small_ir()
    pl = plan_chunks(ir, 0, ((0, 7),))
    assert acc_values(ir, pl, 0) == {0: 9, 1: 10, 2: 1, 3: 12, 5: 9}


def test_chunk_body_accumulator_lines() -> None:
    ir = _small_ir()
    lines = chunk_body(ir, plan_chunks(ir, 0, ((0, 7),)), 0)
    ld = [emit._leaf_c(_cm(k)) for k in range(6)]
    c = emit._leaf_c(Leaf("cm", 1, stage=1, col=0))
    assert lines == [
        f"const gl3_acc a0 = gl3_acc_mul({ld[0]}, {ld[1]});",
        f"const gl3_acc a1 = gl3_acc_addw(a0, {ld[2]});",
        f"const gl3_acc a2 = gl3_acc_mul31({ld[3]}, {c});",
        "const gl3_acc a3 = gl3_acc_sub(a1, a2);",
        f"const gl3 v4 = gl3_mul_v({ld[4]}, {ld[5]});",
        "const gl3_acc a5 = gl3_acc_mul(v4, v4);",
        "const gl3 v6 = gl3_acc_red(gl3_acc_add(a3, a5));",
    ]
    # the exact path (value=False) has none of it
    assert not any("acc" in x for x in chunk_body(ir, plan_chunks(ir, 0, ((0, 7),)), 0, value=False))


def test_a_cut_keeps_values_words() -> None:
    """A value read in a later chunk is stored, so it is a word; the chunk's last op that is read
    across the cut too."""
    ir = _small_ir()
    pl = plan_chunks(ir, 0, ((0, 2), (2, 7),))
    assert acc_values(ir, pl, 0) == {0: 9}            # 1 is read by chunk 1: stored, a word
    assert acc_values(ir, pl, 1) == {2: 1, 3: 2, 5: 9}
    assert chunk_body(ir, pl, 1)[-1] == "const gl3 v6 = gl3_acc_red(gl3_acc_add(a3, a5));"


def test_every_shape_31_and_sub_form() -> None:
    w = Leaf("cm", 1, stage=1, col=1)
    ops = (Op("mul", "33", _cm(0), _cm(1), 3),             # 0 acc
           Op("sub_swap", "33", Val(0, 3), _cm(2), 3),     # 1: x2 - a0 -> wsub
           Op("sub", "31", Val(1, 3), w, 3),               # 2
           Op("add", "31", Val(2, 3), w, 3),               # 3
           Op("sub_swap", "31", Val(3, 3), w, 3),          # 4: w - a3
           Op("sub", "33", _cm(3), Val(4, 3), 3),          # 5: x3 - a4 -> wsub
           Op("sub", "33", Val(5, 3), _cm(4), 3),          # 6: a5 - x4 -> subw
           Op("add", "33", _cm(5), _cm(4), 3),             # 7: words -> acc of words
           Op("sub", "33", Val(6, 3), Val(7, 3), 3))       # 8
    ir = KernelIR(1, True, ops)
    body = [x.split(" = ", 1)[1] for x in chunk_body(ir, plan_chunks(ir, 0, ((0, 9),)), 0)]
    ld = [emit._leaf_c(_cm(k)) for k in range(6)]
    wc = emit._leaf_c(w)
    assert body == [f"gl3_acc_mul({ld[0]}, {ld[1]});", f"gl3_acc_wsub({ld[2]}, a0);",
                    f"gl3_acc_sub31(a1, {wc});", f"gl3_acc_add31(a2, {wc});", f"gl3_acc_rsub31(a3, {wc});",
                    f"gl3_acc_wsub({ld[3]}, a4);", f"gl3_acc_subw(a5, {ld[4]});",
                    f"gl3_acc_addw(gl3_acc_w({ld[5]}), {ld[4]});", "gl3_acc_red(gl3_acc_sub(a6, a7));"]


def test_base_field_accumulators() -> None:
    """Shape 11: a product or add/sub read once by a base-field add or sub stays a gl_acc; a
    base-field value read by a shape-31 op (its dim-1 operand) or a product stays a word."""
    c = [Leaf("cm", 1, stage=1, col=k) for k in range(4)]
    ops = (Op("mul", "11", c[0], c[1], 1),                 # 0 acc (read by 1)
           Op("sub_swap", "11", Val(0, 1), c[2], 1),       # 1: c2 - a0, acc (read by 2)
           Op("add", "11", c[3], Val(1, 1), 1),            # 2: c3 + a1, acc (read by 4)
           Op("sub", "11", c[0], c[1], 1),                 # 3: words, acc (read by 4)
           Op("sub", "11", Val(2, 1), Val(3, 1), 1),       # 4: read by a mul: reduced
           Op("mul", "11", Val(4, 1), c[2], 1),            # 5: read by a shape-31 op: a word
           Op("add", "31", _cm(0), Val(5, 1), 3))          # 6
    ir = KernelIR(1, True, ops)
    pl = plan_chunks(ir, 0, ((0, 7),))
    assert acc_values(ir, pl, 0) == {0: 1, 1: 2, 2: 3, 3: 1}
    ld = [emit._leaf_c(x) for x in c]
    assert chunk_body(ir, pl, 0)[:6] == [
        f"const gl_acc a0 = gl_acc_mul({ld[0]}, {ld[1]});",
        f"const gl_acc a1 = gl_acc_sub(gl_acc_w({ld[2]}), a0);",
        f"const gl_acc a2 = gl_acc_add(gl_acc_w({ld[3]}), a1);",
        f"const gl_acc a3 = gl_acc_sub(gl_acc_w({ld[0]}), gl_acc_w({ld[1]}));",
        "const uint64_t v4 = gl_acc_red(gl_acc_sub(a2, a3));",
        f"const uint64_t v5 = gl_mul(v4, {ld[2]});",
    ]


def test_the_bound_stops_a_long_chain(monkeypatch) -> None:
    """A chain of adds whose bound would pass ACC_HI_BOUND is reduced and starts again."""
    monkeypatch.setattr(render_model, "ACC_HI_BOUND", 12)
    ops = [Op("mul", "33", _cm(0), _cm(1), 3)]
    for k in range(6):
        ops.append(Op("add", "33", Val(k, 3), _cm(2), 3))
    ir = KernelIR(1, True, tuple(ops))
    acc = acc_values(ir, plan_chunks(ir, 0, ((0, 7),)), 0)
    assert acc == {0: 9, 1: 10, 2: 11, 3: 12, 5: 1}    # 4 (bound 13) is reduced: a word again
    lines = chunk_body(ir, plan_chunks(ir, 0, ((0, 7),)), 0)
    assert lines[4].startswith("const gl3 v4 = gl3_acc_red(gl3_acc_addw(a3, ")
    assert lines[5].startswith("const gl3_acc a5 = gl3_acc_addw(gl3_acc_w(")


# ------------------------------------------------------------------ property: random chunked IRs
KINDS = [("mul", "33"), ("add", "33"), ("sub", "33"), ("sub_swap", "33"), ("mul", "31"),
         ("add", "31"), ("sub", "31"), ("sub_swap", "31"),
         ("mul", "11"), ("add", "11"), ("sub", "11"), ("sub_swap", "11")]


@st.composite
def chunked_irs(draw):
    n = draw(st.integers(2, 40))
    ops = []
    for i in range(n):
        arith, shape = draw(st.sampled_from(KINDS))

        def arg(dim: int):
            earlier = [k for k in range(i) if ops[k].dim == dim]
            if earlier and draw(st.booleans()):
                return Val(draw(st.sampled_from(earlier)), dim)
            return _cm(draw(st.integers(0, 5))) if dim == 3 else Leaf("cm", 1, stage=1, col=draw(st.integers(0, 2)))
        a = arg(1 if shape == "11" else 3)
        b = arg(3 if shape == "33" else 1)
        ops.append(Op(arith, shape, a, b, 1 if shape == "11" else 3))
    cuts = sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=4))))
    bounds = [0, *cuts, n]
    return KernelIR(1, True, tuple(ops)), list(zip(bounds, bounds[1:]))


@settings(max_examples=200, deadline=None)
@given(chunked_irs())
def test_accumulators_on_random_chunked_irs(case) -> None:
    ir, chunks = case
    pl = plan_chunks(ir, 0, tuple(chunks))
    users = single_users(ir)
    defs = []
    for c, (s, e) in enumerate(pl.chunks):
        acc = acc_values(ir, pl, c, users)
        for v, bound in acc.items():
            u = users[v]
            assert s <= v < u < e and v != len(ir.ops) - 1 and v not in pl.stores[c]
            assert (ir.ops[u].arith, ir.ops[u].shape) in render_model.ACC_USE
            assert (ir.ops[v].dim == 1) == (ir.ops[u].shape == "11")
            assert 1 <= bound <= ACC_HI_BOUND
        for line in chunk_body(ir, pl, c, users=users):
            for m in re.finditer(r"^const (?:gl3 v|uint64_t v|gl3_acc a|gl_acc a)(\d+) = (?!gl3_make\(scratch|scratch)", line):
                defs.append(int(m.group(1)))
            # an accumulator is read only where it was made: no a<k> of another chunk
            for k in map(int, re.findall(r"\ba(\d+)\b", line)):
                assert k in acc
    assert defs == list(range(len(ir.ops)))


# ------------------------------------------------------------------ mutants in a real kernel
SAMPLE = ROOT / "provingkey-sample"
#: every gl3_acc form with a mutant that is wrong on most rows (a sign, a component, the high word)
MUTANTS = {
    "gl3_acc_mul": "{ gl3_acc r = gl3_acc_mul(a, b); return gl3_acc_make(r.c0, r.c2, r.c1); }",
    "gl3_acc_mul31": "{ return gl3_acc_make(gl_acc_mul(a.v0, b), gl_acc_mul(a.v1, b), gl_acc_mul(a.v0, b)); }",
    "gl3_acc_add": "{ return gl3_acc_sub(x, y); }",
    "gl3_acc_sub": "{ return gl3_acc_add(x, y); }",
    "gl3_acc_addw": "{ return gl3_acc_subw(x, w); }",
    "gl3_acc_subw": "{ return gl3_acc_addw(x, w); }",
    "gl3_acc_wsub": "{ return gl3_acc_subw(x, w); }",
    "gl3_acc_add31": "{ return gl3_acc_sub31(x, w); }",
    "gl3_acc_sub31": "{ return gl3_acc_add31(x, w); }",
    "gl3_acc_rsub31": "{ gl3_acc r = gl3_acc_rsub31(x, w); r.c2 = x.c2; return r; }",
    "gl3_acc_red": "{ return gl3_make(x.c0.lo, gl_acc_red(x.c1), gl_acc_red(x.c2)); }",
}
SIGNATURES = {
    "gl3_acc_mul": "gl3_acc {f}(gl3 a, gl3 b)", "gl3_acc_mul31": "gl3_acc {f}(gl3 a, uint64_t b)",
    "gl3_acc_add": "gl3_acc {f}(gl3_acc x, gl3_acc y)", "gl3_acc_sub": "gl3_acc {f}(gl3_acc x, gl3_acc y)",
    "gl3_acc_addw": "gl3_acc {f}(gl3_acc x, gl3 w)", "gl3_acc_subw": "gl3_acc {f}(gl3_acc x, gl3 w)",
    "gl3_acc_wsub": "gl3_acc {f}(gl3 w, gl3_acc x)", "gl3_acc_add31": "gl3_acc {f}(gl3_acc x, uint64_t w)",
    "gl3_acc_sub31": "gl3_acc {f}(gl3_acc x, uint64_t w)", "gl3_acc_rsub31": "gl3_acc {f}(gl3_acc x, uint64_t w)",
    "gl3_acc_red": "gl3 {f}(gl3_acc x)",
}


@pytest.fixture(scope="module")
def medium():
    [p] = [p for p in discover(SAMPLE) if p.base == "Medium"]
    si, ei = load_air(p.starkinfo, p.expressions)
    ks = hostcheck.kernel_source(p.key, cover(si, ei))
    return p, si, ks, render(ks)


def test_medium_uses_every_accumulator_form(medium) -> None:
    _, _, _, files = medium
    text = "".join(files.values())
    assert all(f"{f}(" in text for f in MUTANTS)


@pytest.mark.parametrize("form", sorted(MUTANTS))
def test_the_host_check_catches_a_wrong_accumulator_form(medium, form: str) -> None:
    p, si, ks, files = medium
    [name] = [n for n, t in files.items() if n.endswith(".cu") and f"{form}(" in t][:1]
    mutant = f"EXPS_HD {SIGNATURES[form].format(f=form + '_m')} {MUTANTS[form]}\n"
    include = '#include "gen_common.cuh"\n'
    head, body = files[name].split(include, 1)      # the mutant after the header, every call to it
    text = head + include + mutant + re.sub(rf"\b{form}\(", f"{form}_m(", body)
    with tempfile.TemporaryDirectory(prefix="exps-acc-") as d:
        lib = hostcheck._load(hostcheck.build_host_library({**files, name: text}, Path(d)))
        res = check_kernel(si, json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text()),
                           ks, lib, q_only=True)
    assert [m.split(":")[0] for m in res.mismatches] == ["Q (scratch 0)"], form
