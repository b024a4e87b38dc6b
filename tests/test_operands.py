"""One operand order in product code (codegen/operands.py, used by ir, synth and bench), and the
oracle's own, independently written copy (reference.py): they agree on every operand kind."""
from __future__ import annotations

import itertools

import pytest

from codegen import operands
from codegen.check import reference
from codegen.sample import synth
from bench import bytecode

KINDS = sorted(operands.RANK)


def test_the_tables_agree_on_every_kind_and_dim() -> None:
    assert set(KINDS) == set(reference._RANK_BY_DIM)
    for kind, dim in itertools.product(KINDS, (1, 3)):
        o = {"type": kind, "dim": dim}
        r = operands.rank_of(kind, dim)
        assert r == reference.operand_rank(o) == synth.rank(o) == bytecode.rank(o), (kind, dim)


def test_the_swap_rules_agree_on_every_pair() -> None:
    for (ka, da), (kb, db) in itertools.product(itertools.product(KINDS, (1, 3)), repeat=2):
        a, b = {"type": ka, "dim": da, "id": 0}, {"type": kb, "dim": db, "id": 1}
        want = reference.bin_order({"op": "sub", "src": [a, b], "dest": {"type": "tmp", "id": 2, "dim": max(da, db)}}).swapped
        assert operands.swapped(ka, da, kb, db) == synth.swapped(a, b) == want, (a, b)
        arith, _ = bytecode._swap({"op": "sub", "src": [a, b]})
        assert (arith == "sub_swap") == want


def test_spec_examples() -> None:
    """spec §1.3: a number before a dim-1 column swaps; dims decide first."""
    assert operands.swapped("number", 1, "cm", 1) and not operands.swapped("cm", 1, "number", 1)
    assert operands.swapped("challenge", 1, "cm", 3)          # dim 3 goes first, whatever the rank
    assert operands.ordered("sub", "n", "c", True) == ("sub_swap", "c", "n")
    assert operands.ordered("mul", "n", "c", True) == ("mul", "c", "n")
    with pytest.raises(KeyError):
        operands.rank_of("x", 1)
