"""Bit-exact Goldilocks arithmetic on raw u64 words (spec §1.1, §1.2).

Values are *partially reduced*: any u64 in ``[0, 2^64)`` is a valid encoding of its residue mod
``p = 2^64 - 2^32 + 1`` (``GL64_PARTIALLY_REDUCED``). Every op below reproduces the production
``gl64_t`` result word for word, not only mod p (spec §1.1 table), so e.g. ``5 - 5 == p`` and
``add(p, 5) == 5`` but ``add(5, p) == p + 5``.

Two flavours with identical semantics:

* ``s_*``: scalar pure-Python-int transcriptions of the spec table (the cross-check model);
* ``canon, add, sub, neg, mul, inv`` and the cubic ``add3, sub3, mul31, mul33, inv3``: numpy
  vectorised over ``np.uint64`` arrays (any broadcastable shapes). Cubic values are tuples
  ``(c0, c1, c2)`` of arrays. uint64 arithmetic wraps mod 2^64 on purpose; the 64x64->128 product
  is built from 32-bit limbs.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import numpy as np
import numpy.typing as npt

P: int = 0xFFFF_FFFF_0000_0001
"""The Goldilocks prime ``2^64 - 2^32 + 1``."""
EPS: int = 0xFFFF_FFFF
"""``2^64 mod p = 2^32 - 1``."""
MASK64: int = (1 << 64) - 1

ArrayLike = npt.ArrayLike
U64 = npt.NDArray[np.uint64]
Cubic = tuple[U64, U64, U64]
ScalarCubic = tuple[int, int, int]

# ---------------------------------------------------------------------------------------------
# (a) scalar model: plain Python ints, straight from the spec §1.1 / §1.2 text
# ---------------------------------------------------------------------------------------------


def s_canon(a: int) -> int:
    """``canon(a) = a >= p ? a - p : a`` (spec §1.1)."""
    return a - P if a >= P else a


def s_add(a: int, b: int) -> int:
    """``s = canon(a) + b; s >= 2^64 ? s - p : s``; only the LEFT operand is canonicalised."""
    s = s_canon(a) + b
    return s - P if s >= 1 << 64 else s


def s_sub(a: int, b: int) -> int:
    """``a' = a < EPS ? a + p : a; a' >= b ? a' - b : a' - b + p`` (spec §1.1)."""
    a2 = a + P if a < EPS else a
    return a2 - b if a2 >= b else a2 - b + P


def s_neg(a: int) -> int:
    """``a <= p ? p - a : 2p - a`` (so ``-0 == p``)."""
    return P - a if a <= P else 2 * P - a


def s_mul(a: int, b: int) -> int:
    """``x = a*b; y = lo64(x) + ((x>>64) & EPS)*EPS - (x>>96)``; one conditional +-p."""
    x = a * b
    y = (x & MASK64) + ((x >> 64) & 0xFFFF_FFFF) * EPS - (x >> 96)
    if y < 0:
        y += P
    elif y >= 1 << 64:
        y -= P
    return y


def _s_sqrn(s: int, n: int) -> int:
    for _ in range(n):
        s = s_mul(s, s)
    return s


def s_inv(x: int) -> int:
    """sppark's addition chain for ``x^(p-2)`` from raw :func:`s_mul` (spec §1.1, GL:525-541)."""
    t1 = s_mul(_s_sqrn(x, 1), x)
    t0 = s_mul(_s_sqrn(t1, 2), t1)
    t0 = s_mul(_s_sqrn(t0, 2), t1)
    t1 = s_mul(_s_sqrn(t0, 6), t0)
    t1 = s_mul(_s_sqrn(t1, 12), t1)
    t1 = s_mul(_s_sqrn(t1, 6), t0)
    t1 = s_mul(_s_sqrn(t1, 1), x)
    t1 = s_mul(_s_sqrn(t1, 32), t1)
    t1 = s_mul(_s_sqrn(t1, 1), x)
    return t1


def s_mul33(a: ScalarCubic, b: ScalarCubic) -> ScalarCubic:
    """3x3 extension product with the interpreter's exact op order (spec §1.2, EG:750-773)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    A01, A02, A12 = s_add(a0, a1), s_add(a0, a2), s_add(a1, a2)
    B01, B02, B12 = s_add(b0, b1), s_add(b0, b2), s_add(b1, b2)
    D, E, F = s_mul(a0, b0), s_mul(a1, b1), s_mul(a2, b2)
    G = s_sub(D, E)
    R0, R1, R2 = s_mul(A12, B12), s_mul(A01, B01), s_mul(A02, B02)
    c0 = s_sub(s_add(R0, G), F)
    c1 = s_sub(s_sub(s_sub(s_add(R1, R0), E), E), D)
    c2 = s_sub(R2, G)
    return (c0, c1, c2)


def s_inv3(a: ScalarCubic) -> ScalarCubic:
    """Extension inverse, exact op order of spec §1.2 (C3:227-256).

    No zero test: raw ``s_inv3((0, 0, 0)) == (p, p, p)`` (a field zero).
    """
    a0, a1, a2 = a
    aa, ac, ba = s_mul(a0, a0), s_mul(a0, a2), s_mul(a1, a0)
    bb, bc, cc = s_mul(a1, a1), s_mul(a1, a2), s_mul(a2, a2)
    aaa, aac, abc, abb = s_mul(aa, a0), s_mul(aa, a2), s_mul(ba, a2), s_mul(ba, a1)
    acc, bbb, bcc, ccc = s_mul(ac, a2), s_mul(bb, a1), s_mul(bc, a2), s_mul(cc, a2)
    t = abc
    for op, v in ((s_add, abc), (s_add, abc), (s_add, abb), (s_sub, aaa), (s_sub, aac),
                  (s_sub, aac), (s_sub, acc), (s_sub, bbb), (s_add, bcc), (s_sub, ccc)):
        t = op(t, v)
    ti = s_inv(t)
    r0 = s_sub(s_sub(s_sub(s_sub(s_add(bc, bb), aa), ac), ac), cc)
    r1 = s_sub(ba, cc)
    r2 = s_sub(s_add(ac, cc), bb)
    return (s_mul(r0, ti), s_mul(r1, ti), s_mul(r2, ti))


# ---------------------------------------------------------------------------------------------
# (b) numpy vectorised twins (wrapping uint64 arithmetic)
# ---------------------------------------------------------------------------------------------

_P = np.uint64(P)
_EPS = np.uint64(EPS)
_M32 = np.uint64(0xFFFF_FFFF)
_S32 = np.uint64(32)
_ZERO = np.uint64(0)

F = TypeVar("F", bound=Callable[..., object])


def _wrapping(fn: F) -> F:
    """Silence numpy's overflow warnings: wrap-around mod 2^64 is the intended semantics."""

    @functools.wraps(fn)
    def inner(*args: object, **kwargs: object) -> object:
        with np.errstate(over="ignore", under="ignore"):
            return fn(*args, **kwargs)

    return inner  # type: ignore[return-value]


def u64(a: ArrayLike) -> U64:
    """Coerce to a ``np.uint64`` array (Python ints must already be in ``[0, 2^64)``)."""
    if isinstance(a, np.ndarray) and a.dtype == np.uint64:
        return a
    if isinstance(a, int):
        return np.array(a, dtype=np.uint64)
    return np.asarray(a, dtype=np.uint64)


def _canon(a: U64) -> U64:
    return np.where(a >= _P, a - _P, a)


def _add(a: U64, b: U64) -> U64:
    ca = _canon(a)
    s = ca + b
    return np.where(s < ca, s + _EPS, s)  # carry out: s_true - p == s_wrapped + (2^64 - p)


def _sub(a: U64, b: U64) -> U64:
    a2 = np.where(a < _EPS, a + _P, a)
    d = a2 - b
    return np.where(a2 >= b, d, d + _P)


def _neg(a: U64) -> U64:
    d = _P - a
    return np.where(a <= _P, d, d + _P)  # 2p - a, computed mod 2^64 (true value < 2^64)


def _mul(a: U64, b: U64) -> U64:
    # 64x64 -> 128 from 32-bit limbs; every partial sum fits in 64 bits. In-place ops keep the
    # number of temporaries (and allocations) low.
    al, ah = a & _M32, a >> _S32
    bl, bh = b & _M32, b >> _S32
    ll = al * bl
    t = ah * bl
    t += ll >> _S32
    mid = al * bh
    mid += t & _M32
    hi = ah * bh
    t >>= _S32
    hi += t
    hi += mid >> _S32
    mid <<= _S32
    ll &= _M32
    mid |= ll  # mid is now lo64(a*b)
    lo = mid
    # y = lo + (hi & EPS) * EPS - (hi >> 32); true range (-2^32, 2^65)
    h0 = hi & _M32
    s = h0 << _S32
    s -= h0
    s += lo
    adj = (s < lo).astype(np.uint64)  # carry out of the add: y >= 2^64 unless a borrow follows
    hi >>= _S32
    adj -= (s < hi).astype(np.uint64)  # borrow of the subtraction: y < 0 unless a carry preceded
    s -= hi
    adj *= _EPS  # +EPS == -p (mod 2^64) for y >= 2^64; -EPS == +p for y < 0; 0 otherwise
    s += adj
    return s


_STACK_LIMIT = 8192
"""Batch independent products by stacking only while the stack stays small (cache-resident and
below glibc's mmap threshold; large temporaries are page-faulted on every op)."""


def _mul_many(xs: list[U64], ys: list[U64]) -> list[U64]:
    pairs = [np.broadcast_arrays(x, y) for x, y in zip(xs, ys)]
    shape = np.broadcast_shapes(*(p[0].shape for p in pairs))
    if len(pairs) * max(1, int(np.prod(shape))) <= _STACK_LIMIT:
        xx = np.stack([np.broadcast_to(x, shape) for x, _ in pairs])
        yy = np.stack([np.broadcast_to(y, shape) for _, y in pairs])
        return list(_mul(xx, yy))
    return [_mul(x, y) for x, y in zip(xs, ys)]


def _sqrn(s: U64, n: int) -> U64:
    for _ in range(n):
        s = _mul(s, s)
    return s


def _inv(x: U64) -> U64:
    t1 = _mul(_sqrn(x, 1), x)
    t0 = _mul(_sqrn(t1, 2), t1)
    t0 = _mul(_sqrn(t0, 2), t1)
    t1 = _mul(_sqrn(t0, 6), t0)
    t1 = _mul(_sqrn(t1, 12), t1)
    t1 = _mul(_sqrn(t1, 6), t0)
    t1 = _mul(_sqrn(t1, 1), x)
    t1 = _mul(_sqrn(t1, 32), t1)
    t1 = _mul(_sqrn(t1, 1), x)
    return t1


@_wrapping
def canon(a: ArrayLike) -> U64:
    """Vectorised :func:`s_canon`."""
    return _canon(u64(a))


@_wrapping
def add(a: ArrayLike, b: ArrayLike) -> U64:
    """Vectorised :func:`s_add` (not bitwise commutative)."""
    return _add(u64(a), u64(b))


@_wrapping
def sub(a: ArrayLike, b: ArrayLike) -> U64:
    """Vectorised :func:`s_sub`."""
    return _sub(u64(a), u64(b))


@_wrapping
def neg(a: ArrayLike) -> U64:
    """Vectorised :func:`s_neg`."""
    return _neg(u64(a))


@_wrapping
def mul(a: ArrayLike, b: ArrayLike) -> U64:
    """Vectorised :func:`s_mul` (bitwise commutative)."""
    return _mul(u64(a), u64(b))


@_wrapping
def inv(a: ArrayLike) -> U64:
    """Vectorised :func:`s_inv` (fixed addition chain; ``inv(0) == 0``)."""
    return _inv(u64(a))


@_wrapping
def add3(a: tuple[ArrayLike, ...], b: tuple[ArrayLike, ...]) -> Cubic:
    """Componentwise ``a_i + b_i`` (spec §1.4 ops 2 arith 0)."""
    return (_add(u64(a[0]), u64(b[0])), _add(u64(a[1]), u64(b[1])), _add(u64(a[2]), u64(b[2])))


@_wrapping
def sub3(a: tuple[ArrayLike, ...], b: tuple[ArrayLike, ...]) -> Cubic:
    """Componentwise ``a_i - b_i`` (spec §1.4 ops 2 arith 1)."""
    return (_sub(u64(a[0]), u64(b[0])), _sub(u64(a[1]), u64(b[1])), _sub(u64(a[2]), u64(b[2])))


@_wrapping
def mul31(a: tuple[ArrayLike, ...], b: ArrayLike) -> Cubic:
    """Componentwise ``a_i * b`` (spec §1.4 ops 1 arith 2)."""
    bb = u64(b)
    return (_mul(u64(a[0]), bb), _mul(u64(a[1]), bb), _mul(u64(a[2]), bb))


@_wrapping
def mul33(a: tuple[ArrayLike, ...], b: tuple[ArrayLike, ...]) -> Cubic:
    """3x3 extension product with the exact op order of spec §1.2 (EG:750-773)."""
    a0, a1, a2 = (u64(x) for x in a)
    b0, b1, b2 = (u64(x) for x in b)
    A01, A02, A12 = _add(a0, a1), _add(a0, a2), _add(a1, a2)
    B01, B02, B12 = _add(b0, b1), _add(b0, b2), _add(b1, b2)
    D, E, Fv, R0, R1, R2 = _mul_many([a0, a1, a2, A12, A01, A02], [b0, b1, b2, B12, B01, B02])
    G = _sub(D, E)
    c0 = _sub(_add(R0, G), Fv)
    c1 = _sub(_sub(_sub(_add(R1, R0), E), E), D)
    c2 = _sub(R2, G)
    return (c0, c1, c2)


@_wrapping
def inv3(a: tuple[ArrayLike, ...]) -> Cubic:
    """Extension inverse with the exact op order of spec §1.2 (C3:227-256).

    No zero test: raw ``inv3((0, 0, 0)) == (p, p, p)`` (field zero), as on the GPU.
    """
    a0, a1, a2 = (u64(x) for x in a)
    aa, ac, ba, bb, bc, cc = _mul_many([a0, a0, a1, a1, a1, a2], [a0, a2, a0, a1, a2, a2])
    aaa, aac, abc, abb, acc, bbb, bcc, ccc = _mul_many(
        [aa, aa, ba, ba, ac, bb, bc, cc], [a0, a2, a2, a1, a2, a1, a2, a2])
    t = abc
    for fn, v in ((_add, abc), (_add, abc), (_add, abb), (_sub, aaa), (_sub, aac),
                  (_sub, aac), (_sub, acc), (_sub, bbb), (_add, bcc), (_sub, ccc)):
        t = fn(t, v)
    ti = _inv(t)
    r0 = _sub(_sub(_sub(_sub(_add(bc, bb), aa), ac), ac), cc)
    r1 = _sub(ba, cc)
    r2 = _sub(_add(ac, cc), bb)
    c0, c1, c2 = _mul_many([r0, r1, r2], [ti, ti, ti])
    return (c0, c1, c2)
