"""twin_ptx.edit: the bounded twin's PTX from the first compile's. The same SASS as
the twin compiled from source is checked through nvcc in tests/test_bounds.py."""
from __future__ import annotations

import pytest

from codegen.build.twin_ptx import TwinPtxError, edit

A, B, C = (f"_Z24k{h * 16}_q_c{i}_kPK11StepsParamsPmS2_m" for h, i in (("a", 1), ("b", 2), ("c", 3)))


def entry(name: str, body: str = "\tret;", directives: str = ".maxntid 256, 1, 1") -> str:
    return (f"\t// .globl\t{name}\n.visible .entry {name}(\n\t.param .u64 {name}_param_0,\n"
            f"\t.param .u64 {name}_param_1\n)\n{directives}\n{{\n\t.reg .b64 \t%rd<3>;\n"
            f"\tld.param.u64 \t%rd1, [{name}_param_0];\n\t{{\n\t.reg .b32 %inner;\n\t}}\n{body}\n}}\n")


HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n\n"
FUNC = (".func  (.param .b64 func_retval0) _Z6gl_invm(\n\t.param .b64 _Z6gl_invm_param_0\n)\n{\n\tret;\n}\n")
GLOBAL = ".global .align 8 .b8 kcccccccccccccccc_q_c3_prog[16] = {0, 1};\n"
PTX = HEAD + entry(A) + "\n" + GLOBAL + entry(B, "\tcall.uni (retval0), _Z6gl_invm, (param0);\n\tret;") + "\n" + FUNC + "\n" + entry(C)


def test_keeps_only_the_twins_renamed_and_bounded() -> None:
    a2, c2 = A.replace("_Z24", "_Z25").replace("_kPK", "_kbPK"), C.replace("_Z24", "_Z25").replace("_kPK", "_kbPK")
    out = edit(PTX, {A: (a2, 2), C: (c2, 3)})
    assert out.startswith(HEAD)
    assert A not in out and C not in out and B not in out.replace(GLOBAL, "")
    assert f"\t// .globl\t{a2}\n.visible .entry {a2}(\n\t.param .u64 {a2}_param_0,\n" in out
    assert f"[{c2}_param_0]" in out and f"{c2}_param_1\n)\n.maxntid 256, 1, 1\n.minnctapersm 3\n{{" in out
    assert f"{a2}_param_1\n)\n.maxntid 256, 1, 1\n.minnctapersm 2\n{{" in out
    # what is outside the entries stays: the device function, the global
    assert FUNC in out and GLOBAL in out
    assert out.count(".entry ") == 2 and out.count("\t// .globl") == 2


def test_a_name_that_prefixes_another_is_not_renamed_inside_it() -> None:
    longer = A.replace("_m", "_mm")
    ptx = HEAD + entry(A, f"\tmov.u64 %rd2, {longer};\n\tret;")
    out = edit(ptx, {A: ("_Z3new", 2)})
    assert "[_Z3new_param_0]" in out and longer in out


@pytest.mark.parametrize("ptx, twins, why", [
    (PTX, {}, "no twin entries"),
    (PTX, {"_Z5other": ("_Z6otherb", 2)}, "not in the PTX"),
    (PTX + entry(A), {A: ("_Z1x", 2)}, "twice"),
    (HEAD + entry(A, directives=".maxntid 128, 1, 1"), {A: ("_Z1x", 2)}, "not exactly one"),
    (HEAD + entry(A, directives=".maxntid 256, 1, 1\n.minnctapersm 2"), {A: ("_Z1x", 3)}, "bounded already"),
    (HEAD + entry(A, directives=".maxntid 256, 1, 1\n.maxnreg 64"), {A: ("_Z1x", 3)}, "bounded already"),
    (HEAD + entry(A).replace("\n}\n", "\n"), {A: ("_Z1x", 2)}, "no closing brace"),
    (PTX, {A: ("_Z1x", 0)}, "bad name"),
    (PTX, {A: ("_Z1x; trap", 2)}, "bad name"),
])
def test_refuses_what_it_does_not_recognize(ptx: str, twins: dict, why: str) -> None:
    with pytest.raises(TwinPtxError, match=why):
        edit(ptx, twins)
