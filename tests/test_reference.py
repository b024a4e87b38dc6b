"""codegen.check.reference: hand-computed raw words, store modes, and a bin-driven scalar cross-check."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from codegen.check import gl64
from codegen.check import reference
from codegen.check.binfile import BinExpression, buffer_commit_size, read_bin
from codegen.check.gl64 import EPS, P
from codegen.check.reference import (ARITH_SUB_SWAP, MUL_INV, OPS_31, WRITE, WRITE_INV, DomainData,
                               UnsupportedOperand, bin_order, eval_expression, eval_q, store)
from require import pk_params, require

HALF = (P + 1) // 2  # inv(2)

SI: dict[str, Any] = {
    "starkStruct": {"nBits": 2, "nBitsExt": 3}, "nStages": 2, "openingPoints": [-1, 0, 1],
    "cmPolsMap": [{"stage": 1, "stagePos": 0, "dim": 1}, {"stage": 1, "stagePos": 1, "dim": 1},
                  {"stage": 1, "stagePos": 2, "dim": 1}, {"stage": 2, "stagePos": 0, "dim": 3}],
    "airValuesMap": [{"stage": 1}, {"stage": 2}, {"stage": 1}],          # positions 0, 1, 4
    "airgroupValuesMap": [{"stage": 2}, {"stage": 2}],                   # positions 0, 3
    "proofValuesMap": [{"stage": 1}, {"stage": 2}],                      # positions 0, 1
    "cExpId": 5,
}


# --- tiny JSON builders -----------------------------------------------------------------------

def cm(i: int, prime: int = 0) -> dict:
    return {"type": "cm", "id": i, "prime": prime, "dim": SI["cmPolsMap"][i]["dim"]}


def tmp(i: int, dim: int = 1) -> dict:
    return {"type": "tmp", "id": i, "dim": dim}


def num(v: int) -> dict:
    return {"type": "number", "value": str(v), "dim": 1}


def leaf(kind: str, i: int, dim: int) -> dict:
    return {"type": kind, "id": i, "dim": dim}


def step(op: str, dest: dict, *src: dict) -> dict:
    return {"op": op, "dest": dest, "src": list(src)}


def u(xs: list[int]) -> np.ndarray:
    return np.array(xs, dtype=np.uint64)


def data(n: int, cm1: list[list[int]] | None = None, cm2: list[list[int]] | None = None,
         const: list[list[int]] | None = None, zi: list[int] | None = None,
         **scalars: list[int]) -> DomainData:
    def cols(x: list[list[int]] | None, k: int) -> np.ndarray:
        return u(x) if x is not None else np.zeros((k, n), dtype=np.uint64)
    vec = {k: u(scalars.get(k, [])) for k in
           ("publics", "challenges", "airvalues", "airgroupvalues", "proofvalues", "evals")}
    return DomainData(n_rows=n, cm={1: cols(cm1, 3), 2: cols(cm2, 3)}, const=cols(const, 1),
                      zi=None if zi is None else u(zi), **vec)


def run(code: list[dict], d: DomainData, extended: bool = False) -> list[list[int]]:
    out = eval_expression(SI, {"expId": 0, "code": code}, d, extended)
    assert out.dtype == np.uint64 and out.shape[1] == d.n_rows
    return [[int(x) for x in row] for row in out]


# --- swap rule and op table (spec §1.3, §1.4) -------------------------------------------------

def test_swapped_equal_dim_add_uses_bin_order() -> None:
    d = data(4, cm1=[[10, 10, 11, 12], [7] * 4, [4] * 4])
    t0 = step("sub", tmp(0), cm(0), cm(1))         # 10 - 7 = p + 3 (10 < EPS → a + p)
    t1 = step("add", tmp(1), tmp(0), cm(2))        # rank tmp1 1 > cm 0 → bin add(cm2, t0)
    assert bin_order(t1).swapped
    assert run([t0], d) == [[P + 3, P + 3, P + 4, P + 5]]
    assert run([t0, t1], d) == [[P + 7, P + 7, P + 8, P + 9]]
    assert gl64.s_add(P + 3, 4) == 7               # what JSON order would have given
    t2 = step("add", tmp(2), tmp(0), num(4))       # tmp1 1 < number 3 → not swapped
    assert not bin_order(t2).swapped
    assert run([t0, t2], d) == [[7, 7, 8, 9]]


def test_sub_swap_1x1() -> None:
    d = data(2, cm1=[[10, 10], [7, 7], [4, 4]])
    s = step("sub", tmp(1), tmp(0), cm(2))         # swapped → sub_swap: B − A = t0 − cm2
    assert bin_order(s).arith == ARITH_SUB_SWAP
    assert run([step("sub", tmp(0), cm(0), cm(1)), s], d) == [[P - 1, P - 1]]


def test_3x1_ops() -> None:
    # cm0 = s = 10 (dim 1); challenge 1 = e = (3, 0, p + 2); challenge 0 = (p + 1, 0, p + 2)
    d = data(1, cm1=[[10], [0], [0]], challenges=[P + 1, 0, P + 2, 3, 0, P + 2])
    e, e0 = leaf("challenge", 1, 3), leaf("challenge", 0, 3)
    sub_se = step("sub", tmp(0, 3), cm(0), e)      # ops 1 arith 3: (s − e0, −e1, −e2)
    assert bin_order(sub_se)[:2] == (OPS_31, ARITH_SUB_SWAP)
    assert run([sub_se], d) == [[P + 7], [P], [P - 2]]
    assert run([step("sub", tmp(0, 3), e, cm(0))], d) == [[P - 7], [0], [P + 2]]
    assert run([step("add", tmp(0, 3), cm(0), e0)], d) == [[11], [0], [P + 2]]  # e0 + s
    assert run([step("mul", tmp(0, 3), cm(0), e0)], d) == [[P + 10], [0], [P + 20]]


def test_3x3_ops() -> None:
    d = data(1, cm2=[[1], [2], [3]], challenges=[1, 2, 3], evals=[4, 5, 6])
    ch, ev = leaf("challenge", 0, 3), leaf("eval", 0, 3)
    prod = step("mul", tmp(0, 3), ch, ev)
    assert run([prod], d) == [[P + 31], [P + 58], [46]]               # §1.2 op order, raw
    # tmp3 (7) > cm3 (6) → bin add3(cm3, t): canon(1) + (p + 31) = p + 32 (JSON order: 32)
    add = step("add", tmp(1, 3), tmp(0, 3), cm(3))
    assert run([prod, add], d) == [[P + 32], [P + 60], [49]]
    swapped_sub = step("sub", tmp(0, 3), ev, ch)   # eval 12 > challenge 11 → sub_swap(ch, ev)
    assert bin_order(swapped_sub).arith == ARITH_SUB_SWAP
    assert run([swapped_sub], d) == [[P + 3], [P + 3], [P + 3]]   # 4 < EPS → 4 + p − 1
    assert run([step("sub", tmp(0, 3), ch, ch)], d) == [[P], [P], [P]]


def test_strides_wrap_trace_and_extended() -> None:
    code = [step("add", tmp(0), cm(0, prime=1), {"type": "const", "id": 0, "prime": -1, "dim": 1})]
    d4 = data(4, cm1=[[1, 2, 3, 4], [0] * 4, [0] * 4], const=[[10, 20, 30, 40]])
    assert run(code, d4) == [[2 + 40, 3 + 10, 4 + 20, 1 + 30]]
    d8 = data(8, cm1=[list(range(1, 9)), [0] * 8, [0] * 8], const=[list(range(10, 90, 10))])
    # extended: stride = prime * blowup (2) → cm row r+2, const row r-2
    assert run(code, d8, extended=True) == [[3 + 70, 4 + 80, 5 + 10, 6 + 20, 7 + 30, 8 + 40,
                                             1 + 50, 2 + 60]]


def test_scalar_buffers_and_prefix_positions() -> None:
    d = data(1, publics=[11, 12], airvalues=[0, 0, 0, 0, 3],
             airgroupvalues=[0, 0, 0, 7, 8, 9], proofvalues=[5, 1, 2, P + 1])
    m = step("mul", tmp(0), leaf("public", 1, 1), leaf("airvalue", 2, 1))    # 12 * av[4]
    assert run([m], d) == [[36]]
    a = step("add", tmp(1, 3), leaf("airgroupvalue", 1, 3), leaf("proofvalue", 1, 3))
    assert run([a], d) == [[8], [10], [P + 10]]  # agv[3..5] + pv[1..3]; canon(9) + (p + 1)
    m2 = step("mul", tmp(2, 3), leaf("proofvalue", 0, 1), leaf("airgroupvalue", 0, 3))
    assert run([m2], d) == [[0], [0], [0]]


def test_copy_zi_and_eval_q() -> None:
    n_ext = 8
    cols = [list(range(1, 9)), [0] * 8, [0] * 8]
    zi = [2, 3, 4, 5, 6, 7, 8, 9]
    code = [step("copy", tmp(0), cm(0, prime=1)),
            step("mul", {"type": "q", "id": 0, "dim": 1}, tmp(0), {"type": "Zi", "boundaryId": 0,
                                                                   "dim": 1})]
    ei = {"expressionsCode": [{"expId": 4, "code": []}, {"expId": 5, "code": code}]}
    q = eval_q(SI, ei, data(n_ext, cm1=cols, zi=zi))
    assert q.shape == (3, n_ext) and q.dtype == np.uint64
    # Zi is read unstrided: zi[r] * cm0[r + 2]
    assert [int(x) for x in q[0]] == [zi[r] * cols[0][(r + 2) % 8] for r in range(8)]
    assert not q[1:].any()
    with pytest.raises(ValueError):   # not a power of two
        eval_q(SI, ei, data(6, cm1=[c[:6] for c in cols], zi=zi[:6]))
    # a larger power-of-two domain keeps the stride opening * blowup (host checks use it)
    q16 = eval_q(SI, ei, data(16, cm1=[c * 2 for c in cols], zi=zi * 2))
    assert [int(x) for x in q16[0]] == [(zi * 2)[r] * (cols[0] * 2)[(r + 2) % 16] for r in range(16)]


def test_unsupported_operands() -> None:
    d = data(2, zi=[1, 1])
    with pytest.raises(UnsupportedOperand):
        run([step("mul", tmp(0, 3), leaf("xDivXSubXi", 0, 3), leaf("challenge", 0, 3))], d)
    with pytest.raises(UnsupportedOperand):
        run([step("mul", tmp(0), {"type": "Zi", "boundaryId": 1, "dim": 1}, num(1))], d)


# --- store modes (spec §4.3) -----------------------------------------------------------------

def test_store_write() -> None:
    v = u([[5, P + 1]])
    assert store(WRITE, v, np.full((3, 2), 99, dtype=np.uint64), 0, 1).tolist() == \
        [[5, P + 1], [0, 0], [0, 0]]
    v3 = u([[1, 2], [3, 4], [5, 6]])
    assert store(WRITE, v3, np.zeros((3, 2), dtype=np.uint64), 0, 3).tolist() == v3.tolist()
    # destDim 1 < vdim 3: the interpreter stores dest.dim = 1 component
    assert store(WRITE, v3, np.full((1, 2), 99, dtype=np.uint64), 0, 3).tolist() == [[1, 2]]
    with pytest.raises(ValueError):
        store(WRITE, v3, np.zeros((2, 2), dtype=np.uint64), 0, 3)
    with pytest.raises(ValueError):
        store(7, v3, np.zeros((3, 2), dtype=np.uint64), 0, 3)


def test_store_mul_inv_dim1() -> None:
    out = store(MUL_INV, u([[2, 1]]), u([[10, P + 4]]), 0, 1)
    assert out.tolist() == [[P + 5, P + 4]]          # raw mul(10, inv 2), mul(p + 4, 1)
    out = store(MUL_INV, u([[2]]), u([[10], [1], [P + 1]]), 0, 1)   # dest_i * u0
    assert out.tolist() == [[P + 5], [HALF], [gl64.s_mul(P + 1, HALF)]]


@pytest.mark.parametrize("a", [0, 1, 7])
def test_store_mul_inv_numerator_dim(a: int) -> None:
    """dim-1 numerator a (WRITE → (a, 0, 0)) over a dim-3 denominator v."""
    v = u([[1], [2], [3]])
    dest = store(WRITE, u([[a]]), np.zeros((3, 1), dtype=np.uint64), 0, 1)
    inv_v = gl64.s_inv3((1, 2, 3))
    got1 = [int(x) for x in store(MUL_INV, v, dest, 0, numerator_dim=1)[:, 0]]
    got3 = [int(x) for x in store(MUL_INV, v, dest, 0, numerator_dim=3)[:, 0]]
    assert got1 == [gl64.s_mul(c, a) for c in inv_v]          # interpreter: u_i * dest0
    assert got3 == list(gl64.s_mul33((a, 0, 0), inv_v))       # generator: mul33(dest, u)
    assert [x % P for x in got1] == [x % P for x in got3]
    if a == 0:
        assert (got1, got3) == ([0, 0, 0], [P, P, 0])          # spec §4.3 example


def test_store_mul_inv_dim3_both() -> None:
    v, dest = u([[1], [2], [3]]), u([[4], [5], [6]])
    want = gl64.s_mul33((4, 5, 6), gl64.s_inv3((1, 2, 3)))
    assert [int(x) for x in store(MUL_INV, v, dest, 0, 3)[:, 0]] == list(want)
    assert [x % P for x in gl64.s_mul33(want, (1, 2, 3))] == [4, 5, 6]


def test_store_write_inv() -> None:
    z = np.zeros((1, 2), dtype=np.uint64)
    assert store(WRITE_INV, u([[2, 1]]), z, 10, 1).tolist() == [[P + 5, 10]]
    out = store(WRITE_INV, u([[2], [0], [0]]), np.zeros((3, 1), dtype=np.uint64), 7, 1)
    assert [int(x) for x in out[:, 0]] == [gl64.s_mul(c, 7) for c in gl64.s_inv3((2, 0, 0))]
    assert [int(x) for x in out[:, 0]] == [(P + 7) // 2, P, P]   # u = (inv 2, p, p); p*7 → p
    # destDim 3 > vdim 1: (scalar * inv v, 0, 0) (the number param has no components 1, 2)
    assert store(WRITE_INV, u([[2, 0]]), np.full((3, 2), 9, dtype=np.uint64), 7, 1).tolist() == \
        [[(P + 7) // 2, 0], [0, 0], [0, 0]]
    # destDim 1 < vdim 3: component 0 of scalar * inv3(v)
    out = store(WRITE_INV, u([[2], [0], [0]]), np.zeros((1, 1), dtype=np.uint64), 7, 1)
    assert out.tolist() == [[(P + 7) // 2]]


def test_store_mul_inv_dest1_value3() -> None:
    """destDim 1 < vdim 3: dest0 * (inv3 v)_0, as the interpreter's dim-1 combine."""
    inv_v = gl64.s_inv3((1, 2, 3))
    out = store(MUL_INV, u([[1], [2], [3]]), u([[5]]), 0, 3)
    assert out.tolist() == [[gl64.s_mul(5, inv_v[0])]]
    assert store(MUL_INV, u([[1], [2], [3]]), u([[5]]), 0, 1).tolist() == out.tolist()


def _hint(name: str, **fields) -> dict:
    return {"name": name, "fields": [{"name": k, "values": v} for k, v in fields.items()]}


def _hv(op: str, i: int = 0, dim: int = 1) -> list[dict]:
    return [{"op": op, "id": i, "dim": dim, "pos": []}] if op != "number" else [{"op": op, "value": "3", "pos": []}]


def _code(exp_id: int, dim: int) -> dict:
    return {"expId": exp_id, "code": [step("add", tmp(0, dim), leaf("cm", 0, dim), leaf("cm", 0, dim))]}


def test_numerator_dims_from_hints() -> None:
    """Read from the raw hintsInfo: the numerator's dim is its expression's last dest dim (the
    hint value's own dim only when the expression has no code)."""
    ei = {"expressionsCode": [_code(1, 1), _code(2, 3), _code(3, 3), _code(4, 3), _code(5, 3), _code(6, 3)],
          "hintsInfo": [
              _hint("im_col", reference=_hv("cm"), numerator=_hv("tmp", 1, dim=3), denominator=_hv("tmp", 2, 3)),
              _hint("im_col", numerator=_hv("tmp", 4, 3), denominator=_hv("tmp", 3, 3)),
              _hint("im_col", numerator=_hv("tmp", 1, 1), denominator=_hv("tmp", 5, 3)),
              _hint("im_col", numerator=_hv("tmp", 4, 3), denominator=_hv("tmp", 5, 3)),
              _hint("im_col", numerator=_hv("number"), denominator=_hv("tmp", 6, 3)),
              _hint("im_col", numerator=_hv("cm", 0, 1), denominator=_hv("tmp", 6, 3)),
              _hint("gsum_col", numerator_air=_hv("tmp", 99, 1), denominator_air=_hv("tmp", 4, 3)),
              _hint("gprod_col", numerator=_hv("tmp", 1) + _hv("tmp", 1), denominator=_hv("tmp", 6, 3)),
          ]}
    assert reference.numerator_dims(ei) == {2: {1}, 3: {3}, 5: {1, 3}, 4: {1}}
    assert [reference.mul_inv_numerator_dim(ei, i) for i in (1, 2, 3, 4, 6)] == [3, 1, 3, 1, 3]
    with pytest.raises(reference.OracleRefusal, match="both dims"):
        reference.mul_inv_numerator_dim(ei, 5)
    assert reference.numerator_dims({"expressionsCode": []}) == {}


def test_refusals_are_oracle_refusals() -> None:
    d = data(4, cm1=[[1, 2, 3, 4]])
    for code in ([step("div", tmp(0), cm(0), cm(0))],
                 [step("add", tmp(0), tmp(5), cm(0))],
                 [step("add", tmp(0), num(1 << 64), cm(0))],
                 [step("add", tmp(0, 3), cm(0), cm(0))]):
        with pytest.raises(reference.OracleRefusal):
            run(code, d)
    assert issubclass(reference.UnsupportedOperand, reference.OracleRefusal)


# --- bin-driven scalar interpreter vs the oracle on real keys (spec §8) --------------------------

PK = Path(__file__).resolve().parents[2] / "shared" / "pk"
AIRS = sorted(PK.glob("**/*.starkinfo.json")) if PK.is_dir() else []
WORDS = [0, 1, 2, 3, EPS - 1, EPS, P - 1, P, P + 1, P + 2, (1 << 64) - 1]


def _word(rnd: random.Random) -> int:
    r = rnd.random()
    return rnd.choice(WORDS) if r < 0.3 else rnd.randrange(16) if r < 0.5 else rnd.getrandbits(64)


def _random_data(si: dict, n: int, rnd: random.Random) -> DomainData:
    def vec(k: int) -> np.ndarray:
        return u([_word(rnd) for _ in range(k)])

    def pos_total(m: list[dict]) -> int:  # + 3: ids past the map's end occur (diff_buses)
        return sum(1 if e["stage"] == 1 else 3 for e in m) + 3
    ns = si["mapSectionsN"]
    cmd = {s: vec(ns.get(f"cm{s}", 0) * n).reshape(-1, n) for s in range(1, si["nStages"] + 2)}
    return DomainData(n, cmd, vec(si["nConstants"] * n).reshape(-1, n), vec(n),
                      vec(si.get("nPublics", 0)), vec(3 * len(si["challengesMap"])),
                      vec(pos_total(si.get("airValuesMap", []))),
                      vec(pos_total(si.get("airgroupValuesMap", []))),
                      vec(pos_total(si.get("proofValuesMap", []))), vec(3 * len(si["evMap"])))


def _bin_row(si: dict, bexpr: BinExpression, d: DomainData, extended: bool, r: int) -> list[int]:
    """Run the decoded bytecode on row r with the scalar model (spec §2.2, §2.4, §1.4)."""
    ns, base, n = si["nStages"], buffer_commit_size(si), d.n_rows
    factor = 1 << (si["starkStruct"]["nBitsExt"] - si["starkStruct"]["nBits"]) if extended else 1
    t1: dict[int, int] = {}
    t3: dict[int, int] = {}
    bufs = {base + 2: d.publics, base + 3: bexpr.numbers, base + 4: d.airvalues,
            base + 5: d.proofvalues, base + 6: d.airgroupvalues, base + 7: d.challenges,
            base + 8: d.evals}

    def load(typ: int, idx: int, off: int, dim: int) -> list[int]:
        row = (r + si["openingPoints"][off] * factor) % n
        if typ == 0:
            return [int(d.const[idx][row])]
        if 1 <= typ <= ns + 1:
            return [int(d.cm[typ][idx + k][row]) for k in range(dim)]
        if typ == ns + 2:
            assert idx == 1
            return [int(d.zi[r])]
        if typ == base:
            return [t1[idx]]
        if typ == base + 1:
            return [t3[idx + k] for k in range(dim)]
        return [int(bufs[typ][idx + k]) for k in range(dim)]

    res: list[int] = []
    for op in bexpr.ops:
        da, db = {0: (1, 1), 1: (3, 1), 2: (3, 3)}[op.kind]
        a, b = load(*op.a, da), load(*op.b, db)
        ar = op.arith
        if op.kind == 0:
            res = [[gl64.s_add, gl64.s_sub, gl64.s_mul][ar](a[0], b[0]) if ar < 3
                   else gl64.s_sub(b[0], a[0])]
        elif op.kind == 1:
            res = [[gl64.s_add(a[0], b[0]), a[1], a[2]], [gl64.s_sub(a[0], b[0]), a[1], a[2]],
                   [gl64.s_mul(x, b[0]) for x in a],
                   [gl64.s_sub(b[0], a[0]), gl64.s_neg(a[1]), gl64.s_neg(a[2])]][ar]
        else:
            res = ([gl64.s_add(x, y) for x, y in zip(a, b)] if ar == 0 else
                   [gl64.s_sub(x, y) for x, y in zip(a, b)] if ar == 1 else
                   list(gl64.s_mul33(tuple(a), tuple(b))) if ar == 2 else
                   [gl64.s_sub(y, x) for x, y in zip(a, b)])
        dest = op.args[1]
        if op.kind == 0:
            t1[dest] = res[0]
        else:
            t3.update({dest + k: v for k, v in enumerate(res)})
    return res


def _air_id(p: Path) -> str:
    return str(p.relative_to(PK)).split("/provingKey/")[-1].replace(".starkinfo.json", "")


@pytest.mark.parametrize("sipath", pk_params(AIRS), ids=_air_id)
def test_oracle_matches_bin_interpreter(sipath: Path) -> None:
    base = str(sipath)[: -len(".starkinfo.json")]
    si = json.loads(sipath.read_text())
    ei = json.loads(Path(base + ".expressionsinfo.json").read_text())
    bf = read_bin(base + ".bin")
    rnd = random.Random(sipath.name)
    n = 16
    checked = 0
    for expr in ei["expressionsCode"]:
        extended = expr["expId"] == si["cExpId"]
        d = _random_data(si, n, rnd)
        try:
            got = eval_expression(si, expr, d, extended)
        except UnsupportedOperand:
            assert any(o["type"] == "xDivXSubXi" for s in expr["code"] for o in s["src"])
            continue
        for r in (0, 1, 7, n - 2, n - 1):
            want = _bin_row(si, bf.expressions[expr["expId"]], d, extended, r)
            assert [int(x) for x in got[:, r]] == want, (expr["expId"], r)
        checked += 1
    assert checked > 0


def test_eval_q_on_a_real_key() -> None:
    hits = [p for p in AIRS if p.name == "SimpleLeft.starkinfo.json"]
    require("pk")
    assert hits, "the key is not in ../shared/pk"
    base = str(hits[0])[: -len(".starkinfo.json")]
    si = json.loads(hits[0].read_text())
    ei = json.loads(Path(base + ".expressionsinfo.json").read_text())
    n_ext = 1 << si["starkStruct"]["nBitsExt"]
    d = _random_data(si, n_ext, random.Random(7))
    q = eval_q(si, ei, d)
    bexpr = read_bin(base + ".bin").expressions[si["cExpId"]]
    assert q.shape == (3, n_ext)
    for r in range(n_ext):
        assert [int(x) for x in q[:, r]] == _bin_row(si, bexpr, d, True, r)
