"""The `.bin` writer's operand order (spec §1.3): one table and one swap rule for the product
(ir.py) and the tools that write or generate `.bin` order (synth.py, bench/bytecode.py).

The numpy oracle (reference.py) keeps its own copy on purpose, written from the spec alone;
tests/test_operands.py asserts that the two agree on every operand kind and dim.
"""
from __future__ import annotations

#: operand type -> (rank when dim 1, rank when dim 3) in the writer's ordering (PA:21-38)
RANK: dict[str, tuple[int, int]] = {
    "cm": (0, 6), "custom": (0, 6), "const": (0, 0), "Zi": (0, 0), "tmp": (1, 7),
    "public": (2, 2), "number": (3, 3), "airvalue": (4, 8), "proofvalue": (5, 10),
    "xDivXSubXi": (6, 6), "airgroupvalue": (9, 9), "challenge": (11, 11), "eval": (12, 12),
}


def rank_of(kind: str, dim: int) -> int:
    """The rank of an operand of type `kind` and dim `dim`; KeyError for an unknown type."""
    lo, hi = RANK[kind]
    return lo if dim == 1 else hi


def swapped(kind_a: str, dim_a: int, kind_b: str, dim_b: int) -> bool:
    """Whether the writer swaps JSON (src0, src1) = (a, b):
    `dimA != dimB ? dimB > dimA : rank(A) > rank(B)`; a swapped `sub` becomes `sub_swap`."""
    if dim_a != dim_b:
        return dim_b > dim_a
    return rank_of(kind_a, dim_a) > rank_of(kind_b, dim_b)


def ordered(op: str, a, b, is_swapped: bool):
    """(arith, A, B) from JSON (op, a, b) and the swap decision."""
    if not is_swapped:
        return op, a, b
    return ("sub_swap" if op == "sub" else op), b, a


def value_slots(stage: int) -> int:
    """Words of one airvalue / airgroupvalue / proofvalue: 1 at stage 1, else 3 (spec §2.4)."""
    return 1 if stage == 1 else 3


def value_positions(stages) -> list[int]:
    """Position of each entry of a values map in its buffer: the prefix sum of `value_slots`
    over the entries before it (spec §2.4)."""
    pos, out = 0, []
    for s in stages:
        out.append(pos)
        pos += value_slots(s)
    return out
