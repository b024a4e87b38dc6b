"""The device field ops of templates/gen_common.cuh (inline PTX, compiled only for the GPU) run
through codegen.check.ptxsim and compared word for word with the oracle (codegen.check.gl64) on
every ordered pair of bench/fieldops.py's edge values and on its mix of words (the inputs the GPU
check uses): without a GPU, CI still checks the very PTX
text the kernels carry (ptxas is left to the GPU check, bench/fieldops.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.fieldops import EDGE, random_words
from codegen.check import gl64, ptxsim
from codegen.check.gl64 import EPS

HEADER = Path(__file__).resolve().parent.parent / "templates" / "gen_common.cuh"
#: the opaque constants the device forms take (exps_k1() = 1, KE = 0 - K1)
CONSTS = {"K1": 1, "KE": EPS, "exps_k1()": 1}
#: the header's device forms
OPS = {"gl_add": gl64.s_add, "gl_sub": gl64.s_sub, "gl_mul": gl64.s_mul}


def device(func: str):
    """The device form of `func` as a Python function of (a, b): its asm statements in the order
    the C body runs them (gl_add: gl_canon_dev's, then its own on the canonical left operand)."""
    own = ptxsim.extract(HEADER, func)
    if func == "gl_add":
        canon = ptxsim.extract(HEADER, "gl_canon_dev")
        return lambda a, b: ptxsim.run(own, {"ca": ptxsim.run(canon, {"a": a, **CONSTS}), "b": b, **CONSTS})
    return lambda a, b: ptxsim.run(own, {"a": a, "b": b, **CONSTS})


@pytest.mark.parametrize("func", sorted(OPS))
def test_device_form_equals_the_oracle_on_every_edge_pair(func: str) -> None:
    got, want = device(func), OPS[func]
    bad = [(a, b) for a in EDGE for b in EDGE if got(a, b) != want(a, b)]
    assert not bad, f"{func}: {len(bad)} of {len(EDGE) ** 2} edge pairs differ, first {bad[0]}"


@pytest.mark.parametrize("func", sorted(OPS))
def test_device_form_equals_the_oracle_on_mixed_words(func: str) -> None:
    got = device(func)
    rng = np.random.default_rng(20261201 + len(func))
    xs, ys = (random_words(rng, 3000).tolist() for _ in range(2))
    for a, b in zip(xs, ys):
        assert got(a, b) == OPS[func](a, b), (func, a, b)


def test_the_simulator_catches_a_wrong_form() -> None:
    """A mutant of gl_canon_dev (its carry dropped) and one that reads an add carry with subc (a
    bug a first device add had) must not pass."""
    asm = ptxsim.extract(HEADER, "gl_canon_dev")
    assert "madc.lo.u32 pv, 0, 0, 0" in asm.text
    dropped = ptxsim.Asm(asm.func, asm.text.replace("madc.lo.u32 pv, 0, 0, 0", "mad.lo.u32 pv, 0, 0, 0"),
                         asm.outputs, asm.inputs)
    assert any(ptxsim.run(dropped, {"a": a, **CONSTS}) != gl64.s_canon(a) for a in EDGE)
    crossed = ptxsim.Asm(asm.func, asm.text.replace("madc.lo.u32 pv, 0, 0, 0", "subc.u32 pv, 0, 0"),
                         asm.outputs, asm.inputs)
    with pytest.raises(ptxsim.PtxError, match="carry flag set by a add-type"):
        ptxsim.run(crossed, {"a": 0, **CONSTS})


def test_an_unknown_instruction_is_an_error() -> None:
    asm = ptxsim.Asm("f", "{\n.reg .u32 x;\nprmt.b32 x, 1, 2, 3;\n}", ["r"], [])
    with pytest.raises(ptxsim.PtxError, match="unsupported instruction 'prmt.b32'"):
        ptxsim.run(asm, {})


def _reduction_case(a: int, b: int) -> tuple[int, int]:
    """(c, b) of gl_mul's reduction in the subtract-first order: b = [lo < hh], c = carry of
    (lo - hh mod 2^64) + hl * EPS; k = c - b."""
    prod = a * b
    lo, hh, hl = prod & ((1 << 64) - 1), prod >> 96, (prod >> 64) & EPS
    d = (lo - hh) % (1 << 64)
    return int(d + hl * EPS >= 1 << 64), int(lo < hh)


#: products x y 2^96 (hl = 0, lo = 0, hh = x y): Y = -x y, the k = -1 case the edge pairs reach only 5
#: times; Y = -1 (s = 2^64 - 1: the fix-up's low word wraps) down to -(2^15 - 1)(2^17 - 1) (-EPS itself is
#: no product of two words: x y = EPS with x < 2^i, y < 2^j, i + j = 32 has no solution)
NEGATIVE_Y = [((x << 48), (y << 48)) for x in (1, 2, 3, 255, 65535) for y in (1, 7, 65535)] + [
    (1 << 63, 1 << 33), (0x7FFF << 49, 0x1FFFF << 47), (0x5555 << 49, 3 << 47)]


def test_the_inputs_reach_every_reduction_case() -> None:
    """Every (c, b) of the reduction (k = 1, 0 twice, -1) occurs among the edge pairs, so each mul
    form's carry handling is exercised by the tests above; NEGATIVE_Y are all k = -1."""
    seen = {_reduction_case(a, b) for a in EDGE for b in EDGE}
    assert seen == {(0, 0), (1, 0), (0, 1), (1, 1)}
    assert all(a >> 64 == b >> 64 == 0 for a, b in NEGATIVE_Y)
    assert {_reduction_case(a, b) for a, b in NEGATIVE_Y} == {(0, 1)}


def test_mul_on_negative_y() -> None:
    got = device("gl_mul")
    assert [got(a, b) for a, b in NEGATIVE_Y] == [gl64.s_mul(a, b) for a, b in NEGATIVE_Y]
