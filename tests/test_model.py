"""codegen.model: strict parsing; every ModelError names the file and the exact JSON path.

Bad inputs are built by mutating the committed Tiny AIR (copied into tmp_path) one value at a
time, so each case differs from a file that parses by exactly the value under test.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from codegen import model
from codegen.model import ModelError, load_air, load_json
from require import pk_params, require

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
TINY = SAMPLE / "synth" / "Basic" / "airs" / "Tiny" / "air"
MEDIUM = SAMPLE / "synth" / "Basic" / "airs" / "Medium" / "air"
PK = ROOT.parent / "shared" / "pk"
PK_AIRS = sorted(PK.glob("**/*.starkinfo.json")) if PK.is_dir() else []
SAMPLE_AIRS = sorted(SAMPLE.glob("**/*.starkinfo.json"))
P = 0xFFFFFFFF00000001


# ------------------------------------------------------------------------------------ helpers
@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the Tiny AIR: (starkinfo path, expressionsinfo path)."""
    for f in TINY.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "Tiny.starkinfo.json", tmp_path / "Tiny.expressionsinfo.json"


def _read(p: Path) -> Any:
    return json.loads(p.read_text())


def _write(p: Path, obj: Any) -> None:
    p.write_text(json.dumps(obj))


def _find_src(ei: dict, pred: Callable[[dict], bool]) -> tuple[int, int, int]:
    """(expression index, step index, src index) of the first source operand matching pred."""
    for i, e in enumerate(ei["expressionsCode"]):
        for k, s in enumerate(e["code"]):
            for j, x in enumerate(s["src"]):
                if pred(x):
                    return i, k, j
    raise AssertionError("no such operand in Tiny")


def _src_path(i: int, k: int, j: int) -> str:
    return f"expressionsCode[{i}].code[{k}].src[{j}]"


def _original(p: Path) -> Path:
    return (TINY if p.name.startswith("Tiny.") else MEDIUM) / p.name


def _mutate_src(ei_path: Path, pred: Callable[[dict], bool], change: Callable[[dict], None]) -> str:
    """Apply `change` to the first operand matching `pred` in a fresh copy of the committed file
    (earlier mutations are discarded); returns that operand's JSON path."""
    ei = _read(_original(ei_path))
    i, k, j = _find_src(ei, pred)
    change(ei["expressionsCode"][i]["code"][k]["src"][j])
    _write(ei_path, ei)
    return _src_path(i, k, j)


def _err(si_path: Path, ei_path: Path) -> ModelError:
    with pytest.raises(ModelError) as ei:
        load_air(si_path, ei_path)
    return ei.value


def _assert_err(e: ModelError, file: Path, path: str, *words: str) -> None:
    assert e.file == str(file)
    assert e.path == path
    for w in words:
        assert w in e.msg, (w, e.msg)
    # the message carries both the file and the path
    assert str(e) == f"{file}: {path or '<root>'}: {e.msg}"


# --------------------------------------------------------------------------- the good files
def test_tiny_parses_with_exact_values(tiny) -> None:
    si_path, ei_path = tiny
    si, ei = load_air(si_path, ei_path)
    assert si.file == str(si_path) and ei.file == str(ei_path)
    assert (si.name, si.airgroup_id, si.air_id) == ("Tiny", 0, 0)
    assert (si.n_bits, si.n_bits_ext, si.n_stages, si.blowup) == (4, 5, 2, 2)
    assert si.opening_points == (0, 1)
    assert si.cm_pols == (model.CmPol(1, 1, 0), model.CmPol(1, 1, 1), model.CmPol(1, 1, 2),
                          model.CmPol(2, 3, 0), model.CmPol(3, 3, 0))
    assert (si.n_constants, si.n_challenges, si.n_publics, si.n_evals) == (1, 6, 1, 8)
    assert si.boundaries == ("everyRow",)
    assert (si.cexp_id, si.q_dim, si.n_custom_commits) == (50, 3, 0)
    assert si.section_cols == {"const": 1, "cm1": 3, "cm2": 3, "cm3": 3}
    assert [e.exp_id for e in ei.expressions] == [6, 11, 50, 51]
    assert [len(e.code) for e in ei.expressions] == [3, 4, 39, 24]
    assert [e.index for e in ei.expressions] == [0, 1, 2, 3]
    assert ei.by_id()[50].stage == 3
    # Q: first op add(number 12, challenge 0); last op mul(tmp 3, Zi 0) into q
    q = ei.by_id()[50].code
    assert q[0].op == "add"
    assert q[0].src == (model.Operand("number", 1, value=12), model.Operand("challenge", 3, id=0))
    assert q[-1].dest == model.Operand("q", 3, id=0)
    assert q[-1].src == (model.Operand("tmp", 3, id=3), model.Operand("Zi", 1, boundary_id=0))
    # expression 6, op 0: add(cm 0', cm 0') (prime is the opening VALUE)
    assert ei.by_id()[6].code[0].src[0] == model.Operand("cm", 1, id=0, prime=1)
    assert ei.hints == (model.HintPair("im_col", ("tmp", 6, 1), ("tmp", 11, 3)),)


def test_medium_value_maps() -> None:
    si, ei = load_air(MEDIUM / "Medium.starkinfo.json", MEDIUM / "Medium.expressionsinfo.json")
    assert si.airvalue_stages == (1, 2, 1)
    assert si.airgroupvalue_stages == (2, 2)
    assert si.proofvalue_stages == (1, 2)
    assert si.n_publics == 3
    # hint pairs: 5 im_col (4 tmp numerators + number + cm) and one gprod_col (number 1 denominator)
    names = sorted(h.name for h in ei.hints)
    assert names == ["gprod_col"] + ["im_col"] * 5


@pytest.mark.parametrize("sipath", SAMPLE_AIRS + pk_params(PK_AIRS),
                         ids=lambda p: str(p).split("/provingKey/")[-1].split("provingkey-sample/")[-1])
def test_every_real_and_sample_air_parses(sipath: Path) -> None:
    base = str(sipath)[: -len(".starkinfo.json")]
    si_json = json.loads(sipath.read_text())
    ei_json = json.loads(Path(base + ".expressionsinfo.json").read_text())
    si, ei = load_air(sipath, base + ".expressionsinfo.json")
    assert si.n_stages == si_json["nStages"]
    assert si.n_bits == si_json["starkStruct"]["nBits"]
    assert si.n_bits_ext == si_json["starkStruct"]["nBitsExt"]
    assert si.opening_points == tuple(si_json["openingPoints"])
    assert len(si.cm_pols) == len(si_json["cmPolsMap"])
    assert si.n_challenges == len(si_json["challengesMap"])
    assert si.n_evals == len(si_json["evMap"])
    assert si.cexp_id == si_json["cExpId"]
    assert [e.exp_id for e in ei.expressions] == [e["expId"] for e in ei_json["expressionsCode"]]
    for e, ej in zip(ei.expressions, ei_json["expressionsCode"]):
        assert [s.op for s in e.code] == [s["op"] for s in ej["code"]]
        for s, sj in zip(e.code, ej["code"]):
            assert [o.type for o in s.src] == [o["type"] for o in sj["src"]]
            for o, oj in zip(s.src, sj["src"]):
                if o.type == "number":
                    assert o.value == int(oj["value"])
                elif o.type in ("cm", "const"):
                    assert (o.id, o.prime) == (oj["id"], oj["prime"])


def test_pk_present_or_skip() -> None:
    require("pk")
    assert len(PK_AIRS) == 37


# ------------------------------------------------------------------------------ file errors
def test_broken_json_names_the_file(tiny) -> None:
    si_path, ei_path = tiny
    ei_path.write_text(ei_path.read_text()[:-40])          # truncated
    e = _err(si_path, ei_path)
    _assert_err(e, ei_path, "", "invalid JSON")


def test_broken_starkinfo_json(tiny) -> None:
    si_path, ei_path = tiny
    si_path.write_text('{"nStages": 2,,}')
    _assert_err(_err(si_path, ei_path), si_path, "", "invalid JSON")


def test_non_utf8_json(tiny) -> None:
    si_path, ei_path = tiny
    ei_path.write_bytes(b'{"expressionsCode": "\xff\xfe"}')
    _assert_err(_err(si_path, ei_path), ei_path, "", "invalid JSON")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as e:
        load_json(tmp_path / "nope.starkinfo.json")
    _assert_err(e.value, tmp_path / "nope.starkinfo.json", "", "cannot read")


def test_root_not_an_object(tiny) -> None:
    si_path, ei_path = tiny
    _write(si_path, [1, 2, 3])
    _assert_err(_err(si_path, ei_path), si_path, "", "expected an object, got list")


# ------------------------------------------------------------------------- missing / typing
def test_missing_src_id_exact_path(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    assert ei["expressionsCode"][0]["code"][1]["src"][0] == {"type": "const", "id": 0, "prime": 0, "dim": 1}
    del ei["expressionsCode"][0]["code"][1]["src"][0]["id"]
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[0].code[1].src[0].id", "missing field")


@pytest.mark.parametrize("field,path", [
    ("starkStruct", "starkStruct"), ("cmPolsMap", "cmPolsMap"), ("openingPoints", "openingPoints"),
    ("cExpId", "cExpId"), ("qDim", "qDim"), ("boundaries", "boundaries"), ("nStages", "nStages"),
    ("challengesMap", "challengesMap"), ("evMap", "evMap"), ("mapSectionsN", "mapSectionsN"),
])
def test_missing_starkinfo_field(tiny, field: str, path: str) -> None:
    si_path, ei_path = tiny
    si = _read(si_path)
    del si[field]
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, path, "missing field")


def test_missing_nested_starkinfo_fields(tiny) -> None:
    si_path, ei_path = tiny
    si = _read(si_path)
    del si["starkStruct"]["nBitsExt"]
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "starkStruct.nBitsExt", "missing field")
    si = _read(TINY / "Tiny.starkinfo.json")
    del si["cmPolsMap"][3]["stagePos"]
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "cmPolsMap[3].stagePos", "missing field")
    si = _read(TINY / "Tiny.starkinfo.json")
    del si["boundaries"][0]["name"]
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "boundaries[0].name", "missing field")


@pytest.mark.parametrize("field", ["op", "dest", "src"])
def test_missing_step_field(tiny, field: str) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    del ei["expressionsCode"][2]["code"][5][field]
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, f"expressionsCode[2].code[5].{field}", "missing field")


def test_missing_expid_and_code(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    del ei["expressionsCode"][3]["expId"]
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[3].expId", "missing field")
    ei = _read(TINY / "Tiny.expressionsinfo.json")
    del ei["expressionsCode"][1]["code"]
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[1].code", "missing field")
    _write(ei_path, {"hintsInfo": []})
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode", "missing field")


@pytest.mark.parametrize("bad,shown", [("0", "'0'"), (True, "True"), (False, "False"), (1.0, "1.0"),
                                       (None, "None"), ([0], "[0]"), ({"v": 0}, "{'v': 0}")])
def test_ill_typed_src_id(tiny, bad, shown: str) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "cm", lambda x: x.__setitem__("id", bad))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".id", f"expected an integer, got {shown}")


def test_bool_for_int_in_starkinfo(tiny) -> None:
    si_path, ei_path = tiny
    si = _read(si_path)
    si["cmPolsMap"][1]["stagePos"] = True
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "cmPolsMap[1].stagePos", "expected an integer, got True")
    si = _read(TINY / "Tiny.starkinfo.json")
    si["starkStruct"]["nBits"] = "4"
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "starkStruct.nBits", "expected an integer, got '4'")
    si = _read(TINY / "Tiny.starkinfo.json")
    si["openingPoints"][1] = "1"
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "openingPoints[1]", "expected an integer")


def test_ill_typed_op_and_type(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][1]["code"][2]["op"] = 7
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[1].code[2].op", "expected a string, got 7")
    path = _mutate_src(ei_path, lambda x: x["type"] == "public", lambda x: x.__setitem__("type", ["public"]))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".type", "expected a string")


def test_list_expected(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][0]["code"] = {"op": "add"}
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[0].code", "expected a list, got dict")


# ------------------------------------------------------------------------ ops and operands
@pytest.mark.parametrize("op", ["div", "ADD", "", "add ", "exp", "add; system(\"rm -rf /\")"])
def test_unknown_op(tiny, op: str) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][2]["code"][7]["op"] = op
    _write(ei_path, ei)
    e = _err(si_path, ei_path)
    _assert_err(e, ei_path, "expressionsCode[2].code[7].op", "unknown op", "add, sub, mul, copy")


@pytest.mark.parametrize("n_src", [0, 1, 3])
def test_arity(tiny, n_src: int) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    st = ei["expressionsCode"][0]["code"][0]
    st["src"] = (st["src"] * 2)[:n_src]
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[0].code[0].src",
                f"op add takes 2 source(s), got {n_src}")


def test_copy_takes_one_source(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][0]["code"][0]["op"] = "copy"
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[0].code[0].src",
                "op copy takes 1 source(s), got 2")
    ei["expressionsCode"][0]["code"][0]["src"] = ei["expressionsCode"][0]["code"][0]["src"][:1]
    _write(ei_path, ei)
    _, ex = load_air(si_path, ei_path)
    st = ex.expressions[0].code[0]
    assert st.op == "copy" and st.src == (model.Operand("cm", 1, id=0, prime=1),)


@pytest.mark.parametrize("t", ["foo", "Cm", "tmp3", "", "const;", "__proto__"])
def test_unknown_operand_type(tiny, t: str) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "challenge", lambda x: x.__setitem__("type", t))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".type", "unknown operand type")


def test_unknown_dest_type(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][1]["code"][0]["dest"]["type"] = "register"
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[1].code[0].dest.type",
                "unknown operand type 'register'")


@pytest.mark.parametrize("dim", [2, 0, 4, -1])
def test_bad_src_dim(tiny, dim: int) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "tmp", lambda x: x.__setitem__("dim", dim))
    e = _err(si_path, ei_path)
    _assert_err(e, ei_path, path + ".dim")
    assert ("dim must be 1 or 3, got 2" in e.msg) if dim == 2 else ("out of range [1, 3]" in e.msg)


def test_bad_dest_dim_and_cm_dim(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][0]["code"][2]["dest"]["dim"] = 2
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[0].code[2].dest.dim", "dim must be 1 or 3")
    si = _read(si_path)
    si["cmPolsMap"][3]["dim"] = 2
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "cmPolsMap[3].dim", "dim must be 1 or 3, got 2")


def test_qdim_two(tiny) -> None:
    si_path, ei_path = tiny
    si = _read(si_path)
    si["qDim"] = 2
    _write(si_path, si)
    _assert_err(_err(si_path, ei_path), si_path, "qDim", "qDim must be 1 or 3, got 2")


# ------------------------------------------------------------------------------- id ranges
@pytest.mark.parametrize("t,limit", [("cm", 5), ("const", 1), ("challenge", 6), ("public", 1),
                                     ("eval", 8)])
def test_id_out_of_range(tiny, t: str, limit: int) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.__setitem__("id", limit))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".id", f"integer {limit} out of range [0, {limit - 1}]")
    # the last valid id passes the range check (it may fail a later check, never on .id)
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.__setitem__("id", limit - 1))
    try:
        load_air(si_path, ei_path)
    except ModelError as e:
        assert e.path != path + ".id"


def test_negative_and_huge_ids(tiny) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "cm", lambda x: x.__setitem__("id", -1))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".id", "integer -1 out of range")
    path = _mutate_src(ei_path, lambda x: x["type"] == "challenge", lambda x: x.__setitem__("id", 1 << 40))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".id", f"integer {1 << 40} out of range [0, 5]")
    ei = _read(ei_path)
    ei["expressionsCode"][0]["code"][0]["dest"]["id"] = (1 << 31) + 1
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[0].code[0].dest.id", "out of range")


@pytest.mark.parametrize("t", ["airvalue", "airgroupvalue", "proofvalue"])
def test_value_ids_when_none_declared(tiny, t: str) -> None:
    """Tiny declares no air/airgroup/proof values: any id is refused on `.id`."""
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "public",
                       lambda x: x.update({"type": t, "id": 0, "stage": 1, "dim": 1}))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".id", f"{t} id 0 but the starkinfo declares no {t}")


def test_zi_boundary_out_of_range(tiny) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "Zi", lambda x: x.__setitem__("boundaryId", 1))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".boundaryId", "integer 1 out of range [0, 0]")


def test_duplicate_expid(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ei["expressionsCode"][1]["expId"] = 6
    _write(ei_path, ei)
    _assert_err(_err(si_path, ei_path), ei_path, "expressionsCode[1].expId", "duplicate expId 6")


# --------------------------------------------------------------------------- number literals
@pytest.mark.parametrize("value,want", [
    ("0", 0), ("1", 1), (str(P - 1), P - 1), (str(P), P), (str((1 << 64) - 1), (1 << 64) - 1),
    ("00012", 12), (7, 7), ((1 << 64) - 1, (1 << 64) - 1),
])
def test_number_literal_accepted(tiny, value, want: int) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    i, k, j = _find_src(ei, lambda x: x["type"] == "number")
    ei["expressionsCode"][i]["code"][k]["src"][j]["value"] = value
    _write(ei_path, ei)
    _, ex = load_air(si_path, ei_path)
    assert ex.expressions[i].code[k].src[j] == model.Operand("number", 1, value=want)


@pytest.mark.parametrize("value,words", [
    (str(1 << 64), ["outside [0, 2^64)"]),
    (str(1 << 70), ["not a decimal u64"]),            # > 20 digits
    ("-1", ["not a decimal u64"]),
    (-1, ["outside [0, 2^64)"]),
    (1 << 64, ["outside [0, 2^64)"]),
    ("0x10", ["not a decimal u64"]),
    ("1; system(\"rm -rf /\")", ["not a decimal u64"]),
    ("1ull); evil(", ["not a decimal u64"]),
    ("1e3", ["not a decimal u64"]),
    ("+5", ["not a decimal u64"]),
    ("", ["not a decimal u64"]),
    ("   ", ["not a decimal u64"]),
    ("\u0661\u0662", ["not a decimal u64"]),         # Arabic-Indic digits: isdigit() but not ASCII
    ("\u00b2", ["not a decimal u64"]),               # superscript two
    ("1_000", ["not a decimal u64"]),
    (1.5, ["expected a number literal"]),
    (True, ["expected a number literal"]),
    (None, ["expected a number literal"]),
    (["1"], ["expected a number literal"]),
])
def test_number_literal_refused(tiny, value, words) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "number", lambda x: x.__setitem__("value", value))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".value", *words)


def test_number_value_missing(tiny) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "number", lambda x: x.pop("value"))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".value", "missing field")


@pytest.mark.parametrize("t", ["number", "Zi"])
def test_dim1_only_operands_with_dim3_are_refused(tiny, t: str) -> None:
    """Number and Zi operands are dim 1 (spec §2.2): one with dim 3 is refused by the model, not a
    KeyError (1, 3) in ir."""
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.__setitem__("dim", 3))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", f"{t} operands have dim 1")
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.__setitem__("dim", 2))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", "dim must be 1 or 3")


@pytest.mark.parametrize("t", ["number", "Zi"])
def test_dim1_only_operands_without_dim_are_refused(tiny, t: str) -> None:
    """A number or Zi operand without `dim` is a missing field, not dim 1 (taken as dim 1, a fuzzed
    input with no `dim` on a number crashes the oracle's swap rule, which reads every source's dim
    as the .bin writer does). The setup writes `dim` for every
    source operand; without it the JSON does not say which operand order the prover's .bin has."""
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.pop("dim"))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", "missing field")


# ------------------------------------------------------------------------------ openings/dims
@pytest.mark.parametrize("t", ["cm", "const"])
def test_prime_not_in_opening_points(tiny, t: str) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.__setitem__("prime", -1))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".prime", "opening -1 is not in openingPoints [0, 1]")


def test_prime_ill_typed_and_missing(tiny) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "cm", lambda x: x.__setitem__("prime", "1"))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".prime", "expected an integer, got '1'")
    path = _mutate_src(ei_path, lambda x: x["type"] == "const", lambda x: x.pop("prime"))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".prime", "missing field")


def test_cm_dim_mismatch_with_cmpolsmap(tiny) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "cm" and x["dim"] == 1,
                       lambda x: x.__setitem__("dim", 3))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", "in cmPolsMap, operand says 3")
    path = _mutate_src(ei_path, lambda x: x["type"] == "cm" and x["dim"] == 3 and x["id"] == 3,
                       lambda x: x.__setitem__("dim", 1))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", "cm 3 has dim 3 in cmPolsMap, operand says 1")


@pytest.mark.parametrize("t,dim,words", [("const", 3, "const operands have dim 1"),
                                         ("challenge", 1, "challenge operands have dim 3"),
                                         ("eval", 1, "eval operands have dim 3"),
                                         ("public", 3, "public operands have dim 1")])
def test_fixed_dims(tiny, t: str, dim: int, words: str) -> None:
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == t, lambda x: x.__setitem__("dim", dim))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", words)


def test_airvalue_dim_by_stage(tmp_path: Path) -> None:
    """Medium: airvalue 0 is stage 1 (dim 1), airvalue 1 stage 2 (dim 3)."""
    for f in MEDIUM.iterdir():
        shutil.copy(f, tmp_path / f.name)
    si_path, ei_path = tmp_path / "Medium.starkinfo.json", tmp_path / "Medium.expressionsinfo.json"
    path = _mutate_src(ei_path, lambda x: x["type"] == "airvalue" and x["id"] == 0,
                       lambda x: x.__setitem__("dim", 3))
    _assert_err(_err(si_path, ei_path), ei_path, path + ".dim", "airvalue 0 (stage 1) has dim 1, operand says 3")


# -------------------------------------------------------------------------- starkinfo ranges
def test_starkinfo_ranges(tiny) -> None:
    si_path, ei_path = tiny
    base = _read(si_path)

    def case(mut, path, *words):
        si = copy.deepcopy(base)
        mut(si)
        _write(si_path, si)
        _assert_err(_err(si_path, ei_path), si_path, path, *words)

    case(lambda s: s["starkStruct"].__setitem__("nBitsExt", 3), "starkStruct.nBitsExt", "out of range [4, 40]")
    case(lambda s: s["starkStruct"].__setitem__("nBits", 41), "starkStruct.nBits", "out of range [0, 40]")
    case(lambda s: s.__setitem__("nStages", 0), "nStages", "out of range [1, 16]")
    case(lambda s: s["cmPolsMap"][0].__setitem__("stage", 4), "cmPolsMap[0].stage", "out of range [1, 3]")
    case(lambda s: s["cmPolsMap"][2].__setitem__("stagePos", 3), "cmPolsMap[2].stagePos",
         "stagePos 3 + dim 1 exceeds mapSectionsN.cm1 = 3")
    case(lambda s: s["cmPolsMap"][3].__setitem__("stagePos", 1), "cmPolsMap[3].stagePos",
         "stagePos 1 + dim 3 exceeds mapSectionsN.cm2 = 3")
    case(lambda s: s["mapSectionsN"].__setitem__("cm1", "3"), "mapSectionsN.cm1", "expected an integer")
    case(lambda s: s.__setitem__("mapSectionsN", [3]), "mapSectionsN", "expected an object")
    case(lambda s: s["openingPoints"].__setitem__(0, 1 << 21), "openingPoints[0]", "out of range")
    case(lambda s: s.__setitem__("cExpId", -1), "cExpId", "out of range")
    case(lambda s: s.__setitem__("airId", True), "airId", "expected an integer, got True")


def test_error_file_is_the_one_with_the_problem(tiny) -> None:
    """A bad operand is reported against the expressionsinfo, a bad map against the starkinfo."""
    si_path, ei_path = tiny
    path = _mutate_src(ei_path, lambda x: x["type"] == "cm", lambda x: x.__setitem__("id", 99))
    e = _err(si_path, ei_path)
    assert e.file == str(ei_path) and e.path == path + ".id"
    assert str(ei_path) in str(e) and path + ".id" in str(e)


# ---------------------------------------------------------------- duplicate keys, dangling hints
def _dup_key(p: Path, obj: dict, where: dict, key: str, value: Any) -> None:
    """Write `obj` with `key` appearing a second time (with `value`) in the object `where`."""
    where["__dup__"] = 1
    text = json.dumps(obj).replace('"__dup__": 1', f'{json.dumps(key)}: {json.dumps(value)}')
    del where["__dup__"]
    p.write_text(text)


def test_duplicate_key_names_the_json_path(tiny) -> None:
    si_path, ei_path = tiny
    si = _read(si_path)
    # a second nBits inside starkStruct: json.loads would silently keep the last one
    _dup_key(si_path, si, si["starkStruct"], "nBits", 99)
    _assert_err(_err(si_path, ei_path), si_path, "starkStruct.nBits", "duplicate key 'nBits'")


def test_duplicate_key_deep_in_a_list(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    i, k, j = _find_src(ei, lambda s: s["type"] == "tmp")
    _dup_key(ei_path, ei, ei["expressionsCode"][i]["code"][k]["src"][j], "type", "tmp")
    _assert_err(_err(si_path, ei_path), ei_path, _src_path(i, k, j) + ".type", "duplicate key 'type'")


def test_same_key_in_different_objects_is_fine(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]}')
    assert load_json(p) == {"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]}


def test_dangling_hint_reference(tiny) -> None:
    si_path, ei_path = tiny
    ei = _read(ei_path)
    ids = {e["expId"] for e in ei["expressionsCode"]}
    missing = max(ids) + 1000
    assert ei["hintsInfo"][0]["fields"][1]["values"][0] == {"op": "tmp", "id": 6, "dim": 1, "pos": []}
    ei["hintsInfo"][0]["fields"][1]["values"][0]["id"] = missing
    _write(ei_path, ei)
    e = _err(si_path, ei_path)
    _assert_err(e, ei_path, "hintsInfo[0].fields[1].values[0].id",
                f"hint references expression {missing}", "not in expressionsCode")


def test_fifo_and_directory_inputs_are_refused_without_blocking(tiny, tmp_path: Path) -> None:
    si_path, ei_path = tiny
    ei_path.unlink()
    os.mkfifo(ei_path)                 # an open() without O_NONBLOCK would wait forever
    e = _err(si_path, ei_path)
    _assert_err(e, ei_path, "", "cannot read", "FIFO")
    ei_path.unlink()
    ei_path.mkdir()
    e = _err(si_path, ei_path)
    _assert_err(e, ei_path, "", "cannot read", "directory")
