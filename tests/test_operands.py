"""The `.bin` writer's operand order: the rank table and the swap rule of spec §1.3, written here
from the spec's text, against each table and rule the code has: the product's
(codegen/operands.py, which ir, synth and bench use) and the oracle's own, independently written
copy (codegen/check/reference.py). Each is compared with the spec, not with another copy."""
from __future__ import annotations

import itertools

import pytest

from codegen import operands
from codegen.check import reference
from codegen.sample import synth
from bench import bytecode

#: spec §1.3 (PA:21-38): `cm dim1 / const / Zi / custom dim1 -> 0`, `tmp1 -> 1`, `public -> 2`,
#: `number -> 3`, `airvalue1 -> 4`, `proofvalue1 -> 5`, `cm3 / custom3 / xDivXSubXi -> 6`,
#: `tmp3 -> 7`, `airvalue3 -> 8`, `airgroupvalue -> 9`, `proofvalue(3) -> 10`, `challenge -> 11`,
#: `eval -> 12`; a kind the spec gives one rank has it at both dims
SPEC_RANK: dict[tuple[str, int], int] = {
    ("cm", 1): 0, ("const", 1): 0, ("const", 3): 0, ("Zi", 1): 0, ("Zi", 3): 0, ("custom", 1): 0,
    ("tmp", 1): 1, ("public", 1): 2, ("public", 3): 2, ("number", 1): 3, ("number", 3): 3,
    ("airvalue", 1): 4, ("proofvalue", 1): 5, ("cm", 3): 6, ("custom", 3): 6, ("xDivXSubXi", 1): 6,
    ("xDivXSubXi", 3): 6, ("tmp", 3): 7, ("airvalue", 3): 8, ("airgroupvalue", 1): 9,
    ("airgroupvalue", 3): 9, ("proofvalue", 3): 10, ("challenge", 1): 11, ("challenge", 3): 11,
    ("eval", 1): 12, ("eval", 3): 12,
}
KINDS = sorted({k for k, _ in SPEC_RANK})
PAIRS = list(itertools.product(sorted(SPEC_RANK), repeat=2))


def spec_swapped(a: tuple[str, int], b: tuple[str, int]) -> bool:
    """spec §1.3: `swap = (dimA != dimB) ? (dimB > dimA) : (rank(A) > rank(B))`."""
    return b[1] > a[1] if a[1] != b[1] else SPEC_RANK[a] > SPEC_RANK[b]


def _json(kind_dim: tuple[str, int], i: int) -> dict:
    return {"type": kind_dim[0], "dim": kind_dim[1], "id": i}


def test_the_spec_table_covers_each_kind_the_code_knows() -> None:
    assert set(KINDS) == set(operands.RANK) == set(reference._RANK_BY_DIM)


@pytest.mark.parametrize("rank_of", [
    pytest.param(lambda k, d: operands.rank_of(k, d), id="operands"),
    pytest.param(lambda k, d: reference.operand_rank({"type": k, "dim": d}), id="reference"),
    pytest.param(lambda k, d: synth.rank({"type": k, "dim": d}), id="synth"),
    pytest.param(lambda k, d: bytecode.rank({"type": k, "dim": d}), id="bytecode"),
])
def test_each_rank_table_is_the_specs(rank_of) -> None:
    got = {kd: rank_of(*kd) for kd in SPEC_RANK}
    assert got == SPEC_RANK


def test_each_swap_rule_is_the_specs_on_every_pair() -> None:
    for a, b in PAIRS:
        want = spec_swapped(a, b)
        assert operands.swapped(a[0], a[1], b[0], b[1]) == want, (a, b)
        assert synth.swapped(_json(a, 0), _json(b, 1)) == want, (a, b)
        step = {"op": "sub", "src": [_json(a, 0), _json(b, 1)], "dest": {"type": "tmp", "id": 2, "dim": max(a[1], b[1])}}
        assert reference.bin_order(step).swapped == want, (a, b)
        arith, _ = bytecode._swap({"op": "sub", "src": [_json(a, 0), _json(b, 1)]})
        assert (arith == "sub_swap") == want, (a, b)


def test_spec_examples() -> None:
    """spec §1.3: a number before a dim-1 column swaps; dims decide first."""
    assert operands.swapped("number", 1, "cm", 1) and not operands.swapped("cm", 1, "number", 1)
    assert operands.swapped("challenge", 1, "cm", 3)          # dim 3 goes first, whatever the rank
    assert operands.ordered("sub", "n", "c", True) == ("sub_swap", "c", "n")
    assert operands.ordered("mul", "n", "c", True) == ("mul", "c", "n")
    with pytest.raises(KeyError):
        operands.rank_of("x", 1)
