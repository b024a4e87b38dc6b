"""codegen.check.gl64: vectorised ops == scalar model; raw-word facts of spec §1.1, §1.2, §4.3."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.check import gl64
from codegen.check.gl64 import EPS, P

EDGES = [0, 1, 2, 3, 5, 7, EPS - 1, EPS, EPS + 1, 1 << 32, P - 2, P - 1, P, P + 1, P + 2,
         1 << 63, (1 << 64) - 2, (1 << 64) - 1]
BINARY = [(gl64.add, gl64.s_add), (gl64.sub, gl64.s_sub), (gl64.mul, gl64.s_mul)]
UNARY = [(gl64.canon, gl64.s_canon), (gl64.neg, gl64.s_neg), (gl64.inv, gl64.s_inv)]

words = st.one_of(st.sampled_from(EDGES), st.integers(0, 1 << 33),
                  st.integers(P - (1 << 33), (1 << 64) - 1), st.integers(0, (1 << 64) - 1))
cubics = st.tuples(words, words, words)


def u(xs: list[int]) -> np.ndarray:
    return np.array(xs, dtype=np.uint64)


def ints(a: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(a).ravel()]


def canon3(c: tuple[int, int, int]) -> tuple[int, ...]:
    return tuple(x % P for x in c)


def schoolbook(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int]:
    """(a*b) mod (X^3 - X - 1) over canonical ints: X^3 = X + 1, X^4 = X^2 + X."""
    c = [0] * 5
    for i in range(3):
        for j in range(3):
            c[i + j] += a[i] * b[j]
    return ((c[0] + c[3]) % P, (c[1] + c[3] + c[4]) % P, (c[2] + c[4]) % P)


# --- vectorised == scalar --------------------------------------------------------------------

@pytest.mark.parametrize("vec,ref", BINARY, ids=lambda f: getattr(f, "__name__", ""))
def test_binary_edges_pairwise(vec, ref) -> None:
    rnd = random.Random(1)
    vals = EDGES + [rnd.getrandbits(64) for _ in range(40)]
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    assert ints(vec(u(a), u(b))) == [ref(x, y) for x, y in zip(a, b)]


@pytest.mark.parametrize("vec,ref", UNARY, ids=lambda f: getattr(f, "__name__", ""))
def test_unary_edges(vec, ref) -> None:
    rnd = random.Random(2)
    vals = EDGES + [rnd.getrandbits(64) for _ in range(200)]
    assert ints(vec(u(vals))) == [ref(x) for x in vals]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(words, words), min_size=1, max_size=40))
def test_property_base_ops(pairs: list[tuple[int, int]]) -> None:
    a, b = u([x for x, _ in pairs]), u([y for _, y in pairs])
    for vec, ref in BINARY:
        assert ints(vec(a, b)) == [ref(x, y) for x, y in pairs]
    for vec, ref in UNARY:
        assert ints(vec(a)) == [ref(x) for x, _ in pairs]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(cubics, cubics), min_size=1, max_size=12))
def test_property_cubic_ops(pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
    a = tuple(u([x[0][i] for x in pairs]) for i in range(3))
    b = tuple(u([x[1][i] for x in pairs]) for i in range(3))
    got = [list(zip(*(ints(c) for c in r))) for r in (gl64.mul33(a, b), gl64.inv3(a))]
    assert got[0] == [gl64.s_mul33(x, y) for x, y in pairs]
    assert got[1] == [gl64.s_inv3(x) for x, _ in pairs]
    add3 = list(zip(*(ints(c) for c in gl64.add3(a, b))))
    sub3 = list(zip(*(ints(c) for c in gl64.sub3(a, b))))
    mul31 = list(zip(*(ints(c) for c in gl64.mul31(a, b[0]))))
    for k, (x, y) in enumerate(pairs):
        assert add3[k] == tuple(gl64.s_add(x[i], y[i]) for i in range(3))
        assert sub3[k] == tuple(gl64.s_sub(x[i], y[i]) for i in range(3))
        assert mul31[k] == tuple(gl64.s_mul(x[i], y[0]) for i in range(3))


def test_large_arrays_take_the_unstacked_path() -> None:
    rnd = random.Random(3)
    n = 5000  # 6 * n > the stacking limit
    a = tuple(u([rnd.getrandbits(64) for _ in range(n)]) for _ in range(3))
    b = tuple(u([rnd.getrandbits(64) for _ in range(n)]) for _ in range(3))
    got = list(zip(*(ints(c) for c in gl64.mul33(a, b))))
    idx = list(range(0, n, 97))
    assert [got[k] for k in idx] == [gl64.s_mul33(tuple(int(c[k]) for c in a),
                                                  tuple(int(c[k]) for c in b)) for k in idx]


def test_broadcast_and_no_warnings() -> None:
    x = u([P + 3, 5, (1 << 64) - 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ints(gl64.add(x, np.uint64(P))) == [gl64.s_add(int(v), P) for v in x]
        assert ints(gl64.mul(np.uint64((1 << 64) - 1), np.uint64((1 << 64) - 1))) == \
            [gl64.s_mul((1 << 64) - 1, (1 << 64) - 1)]
        assert ints(gl64.mul31((x, x, x), u([7]))[2]) == [gl64.s_mul(int(v), 7) for v in x]
        assert ints(gl64.sub(3, x)) == [gl64.s_sub(3, int(v)) for v in x]


# --- raw-word facts (spec §1.1) --------------------------------------------------------------

def test_spec_facts() -> None:
    assert gl64.s_sub(5, 5) == P and ints(gl64.sub(u([5]), u([5]))) == [P]
    assert gl64.s_add(P, 5) == 5 and ints(gl64.add(u([P]), u([5]))) == [5]
    assert gl64.s_add(5, P) == P + 5 and ints(gl64.add(u([5]), u([P]))) == [P + 5]
    assert gl64.s_neg(0) == P and ints(gl64.neg(u([0]))) == [P]
    assert ints(gl64.canon(u([P, P + 1, P - 1, (1 << 64) - 1, 0]))) == [0, 1, P - 1, EPS - 1, 0]
    assert gl64.s_neg(P + 2) == P - 2
    assert gl64.s_mul(P + 2, 10) == P + 20      # products are partially reduced too
    assert gl64.s_inv(0) == 0 and ints(gl64.inv(u([0]))) == [0]
    assert gl64.s_inv(2) == (P + 1) // 2


def test_inverse_is_field_inverse() -> None:
    rnd = random.Random(4)
    vals = [v for v in EDGES + [rnd.getrandbits(64) for _ in range(300)] if v % P]
    for v in vals:
        assert gl64.s_canon(gl64.s_mul(gl64.s_inv(v), v)) == 1
    got = gl64.canon(gl64.mul(gl64.inv(u(vals)), u(vals)))
    assert ints(got) == [1] * len(vals)


def test_mul33_matches_schoolbook() -> None:
    rnd = random.Random(5)
    for _ in range(300):
        a = tuple(rnd.choice(EDGES + [rnd.getrandbits(64)]) for _ in range(3))
        b = tuple(rnd.choice(EDGES + [rnd.getrandbits(64)]) for _ in range(3))
        assert canon3(gl64.s_mul33(a, b)) == schoolbook(canon3(a), canon3(b))
        assert gl64.s_mul33(a, b) == gl64.s_mul33(b, a)  # bitwise symmetric (spec §1.2)
    assert gl64.s_mul33((1, 2, 3), (4, 5, 6)) == (P + 31, P + 58, 46)  # hand-computed raw words


def test_inv3_is_field_inverse() -> None:
    rnd = random.Random(6)
    for _ in range(200):
        a = tuple(rnd.choice(EDGES + [rnd.getrandbits(64)]) for _ in range(3))
        if canon3(a) == (0, 0, 0):
            continue
        assert canon3(gl64.s_mul33(gl64.s_inv3(a), a)) == (1, 0, 0)
    assert gl64.s_inv3((1, 0, 0)) == (1, P, P)


def test_inv3_of_zero_is_a_field_zero() -> None:
    # spec §1.2 says inv(0) = (0,0,0); with no zero test the raw words are (p, p, p).
    assert gl64.s_inv3((0, 0, 0)) == (P, P, P)
    assert [ints(c) for c in gl64.inv3((u([0]), u([0]), u([0])))] == [[P], [P], [P]]


def test_mul33_dim1_numerator_zero() -> None:
    """Spec §4.3: generator's cg_mul33((0,0,0), u) = (p, p, 0) vs the interpreter's u_i*0 = 0."""
    for u3 in [(1, 2, 3), (P, 0, 5), ((1 << 64) - 1, EPS, 1 << 63)]:
        assert gl64.s_mul33((0, 0, 0), u3) == (P, P, 0)
        assert [ints(c) for c in gl64.mul33((u([0]),) * 3, tuple(u([x]) for x in u3))] == \
            [[P], [P], [0]]
        assert tuple(gl64.s_mul(x, 0) for x in u3) == (0, 0, 0)
