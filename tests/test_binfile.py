"""codegen.check.binfile: decoding, and our swap rule (codegen.check.reference) vs every real ``.bin``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from codegen.check import binfile
from codegen.check.binfile import BinFormatError, compare_expression, parse_bin, read_bin
from codegen.check.reference import bin_order
from require import pk_params, require

PK = Path(__file__).resolve().parents[2] / "shared" / "pk"
AIRS = sorted(PK.glob("**/*.starkinfo.json")) if PK.is_dir() else []


def _load(starkinfo_path: Path) -> tuple[dict, dict, binfile.BinFile]:
    base = str(starkinfo_path)[: -len(".starkinfo.json")]
    si = json.loads(starkinfo_path.read_text())
    ei = json.loads(Path(base + ".expressionsinfo.json").read_text())
    return si, ei, read_bin(base + ".bin")


def _air_id(p: Path) -> str:
    return str(p.relative_to(PK)).split("/provingKey/")[-1].replace(".starkinfo.json", "")


def test_pk_present_or_skip() -> None:
    require("pk")
    assert AIRS, f"no *.starkinfo.json under {PK}"


@pytest.mark.parametrize("sipath", pk_params(AIRS), ids=_air_id)
def test_swap_rule_matches_bin(sipath: Path) -> None:
    si, ei, bf = _load(sipath)
    checked = 0
    for expr in ei["expressionsCode"]:
        bexpr = bf.expressions.get(expr["expId"])
        if bexpr is None:
            continue
        assert len(bexpr.args) == 8 * len(bexpr.op_kinds)
        assert compare_expression(si, expr, bexpr) == []
        checked += 1
    assert checked == len(ei["expressionsCode"])  # every JSON expression is in this set's bins


@pytest.mark.parametrize("sipath", pk_params(AIRS), ids=_air_id)
def test_json_prime_is_the_opening_value(sipath: Path) -> None:
    """For cm/const operands: ``openingPoints[bin off] == JSON prime`` (prime = opening VALUE)."""
    si, ei, bf = _load(sipath)
    opening = si["openingPoints"]
    for expr in ei["expressionsCode"]:
        for step, op in zip(expr["code"], bf.expressions[expr["expId"]].ops):
            bs = bin_order(step)
            for o, (_, _, off) in ((bs.a, op.a), (bs.b, op.b)):
                if o is not None and o["type"] in ("cm", "const"):
                    assert opening[off] == o["prime"], (expr["expId"], o)


def test_swapped_equal_dim_adds_exist() -> None:
    """The order-sensitive case of spec §1.4 occurs in this key set and is predicted right."""
    require("pk")
    swapped = 0
    for sipath in AIRS:
        _, ei, _ = _load(sipath)
        for expr in ei["expressionsCode"]:
            for step in expr["code"]:
                if step["op"] == "add" and step["src"][0]["dim"] == step["src"][1]["dim"]:
                    swapped += bin_order(step).swapped
    assert swapped > 0


def test_nstages_one_type_codes() -> None:
    """expr_optimizations has nStages == 1: Zi = nStages+2 = 3, xDivXSubXi = 4, tmp1 = B = 5."""
    hits = [p for p in AIRS if "expr_optimizations" in str(p)]
    require("pk")
    assert hits, "the key is not in ../shared/pk"
    si, ei, bf = _load(hits[0])
    assert si["nStages"] == 1 and binfile.buffer_commit_size(si) == 5
    types = {(o["type"], o["dim"]): code
             for expr in ei["expressionsCode"]
             for step, op in zip(expr["code"], bf.expressions[expr["expId"]].ops)
             for o, code in ((bin_order(step).a, op.a[0]), (bin_order(step).b, op.b[0]))}
    assert types[("Zi", 1)] == 3 and types[("xDivXSubXi", 3)] == 4 and types[("tmp", 1)] == 5


# --- synthetic bytes --------------------------------------------------------------------------

def _build(exprs: list[tuple[list[int], list[int]]], numbers: list[int]) -> bytes:
    """A chps v1 file with section 1 only (and an empty section 2 in front, to test lookup)."""
    n_ops = sum(len(o) for o, _ in exprs)
    n_args = sum(len(a) for _, a in exprs)
    body = struct.pack("<8I", 1, 1, 16, 2, n_ops, n_args, len(numbers), len(exprs))
    ops_off = args_off = 0
    for k, (ops, args) in enumerate(exprs):
        body += struct.pack("<10I", 10 + k, 3, 0, 2, 1, 1, len(ops), ops_off, len(args), args_off)
        body += f"line{k}".encode() + b"\0"
        ops_off += len(ops)
        args_off += len(args)
    body += bytes(o for ops, _ in exprs for o in ops)
    body += struct.pack(f"<{n_args}H", *(a for _, args in exprs for a in args))
    body += struct.pack(f"<{len(numbers)}Q", *numbers)
    head = b"chps" + struct.pack("<II", 1, 2)
    return head + struct.pack("<IQ", 2, 0) + struct.pack("<IQ", 1, len(body)) + body


def test_parse_synthetic() -> None:
    e0 = ([2, 1], [0, 3, 9, 0, 0, 8, 3, 0, 3, 0, 1, 0, 0, 10, 0, 0])
    e1 = ([0], [1, 0, 1, 4, 2, 9, 1, 0])
    bf = parse_bin(_build([e0, e1], [7, (1 << 64) - 1]))
    assert bf.numbers == (7, (1 << 64) - 1)
    assert sorted(bf.expressions) == [10, 11]
    x = bf.expressions[10]
    assert (x.dest_dim, x.stage, x.n_temp1, x.n_temp3, x.line) == (3, 2, 1, 1, "line0")
    assert [(o.kind, o.arith, o.a, o.b) for o in x.ops] == [
        (2, 0, (9, 0, 0), (8, 3, 0)), (1, 3, (1, 0, 0), (10, 0, 0))]
    assert bf.expressions[11].ops[0].a == (1, 4, 2)


def test_parse_errors() -> None:
    good = _build([([0], [0] * 8)], [])
    with pytest.raises(BinFormatError):
        parse_bin(b"xxxx" + good[4:])
    with pytest.raises(BinFormatError):
        parse_bin(good[:-3])
    odd = parse_bin(_build([([0], [0] * 5)], []))  # a Rust-writer `copy` (5 args, spec §7.3)
    with pytest.raises(BinFormatError):
        _ = odd.expressions[10].ops
