"""codegen.emit: deterministic text, file names, the op/leaf tables, the exported ABI, a 40,000-op
Q, and random expression DAGs run end to end (cover -> emit -> g++ -> ctypes) against the oracle."""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import EMITTER_VERSION, emit, render_model
from codegen.check import hostcheck
from codegen.sample import synth
from require import require, requires
from codegen.discover import discover
from codegen.emit import (OP_C, Q_PARAMS, TU_OPS, X_PARAMS, XINV_PARAMS, ExprKernel, KernelSource, chunk_body,
                          device_tus, kernel_symbol, pack, q_part, render, render_parts, tu_kernels, tu_twins,
                          x_parts)
from codegen.ir import KernelIR, Leaf, Op, Val, lower
from codegen.coverage import cover
from codegen.model import CmPol, Expression, Operand, StarkInfo, Step, load_air, parse_expressionsinfo, \
    parse_starkinfo
from codegen.plan import plan, plan_chunks
from codegen.remat import recomputable

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
P = 0xFFFFFFFF00000001
EPS = 0xFFFFFFFF
HASH = "0123456789abcdef" * 4
needs_gxx = requires("gxx")      # tests/require.py: skip, or fail under EXPS_REQUIRE
ROW_KINDS = ("cm", "const", "zi")


def _air(name: str, group: str = "Basic", leaf: str = "air"):
    d = SAMPLE / f"synth/{group}/airs/{name}/{leaf}"
    si, ei = load_air(d / f"{name}.starkinfo.json", d / f"{name}.expressionsinfo.json")
    return si, ei, json.loads((d / f"{name}.starkinfo.json").read_text()), \
        json.loads((d / f"{name}.expressionsinfo.json").read_text())


def _ks(name: str, opc: int | None = None, key: str | None = None, exprs=None, passes: bool = True) -> KernelSource:
    si, ei, _, _ = _air(name)
    cov = cover(si, ei)
    ks = hostcheck.kernel_source(key or f"k_{name.lower()}", cov, opc, HASH)
    if not passes:     # the emitter's layout on the IR as lowered (op for op)
        c = hostcheck.default_ops_per_chunk(len(cov.q.ops)) if opc is None else opc
        ks = KernelSource(ks.key, cov.q, plan(cov.q, c), ks.exprs, HASH, passes=False)
    if exprs is not None:
        ks.exprs = exprs(ks.exprs)
    return ks


def _reads_row(ops) -> bool:
    return any(isinstance(a, Leaf) and a.kind in ROW_KINDS for op in ops for a in op.args())


# ============================================================================ determinism
@pytest.mark.parametrize("name,opc", [("Tiny", None), ("Medium", None), ("Medium", 16), ("Large", 256)])
def test_render_is_deterministic(name: str, opc) -> None:
    a = render(_ks(name, opc))
    b = render(_ks(name, opc))           # fresh parse, fresh cover, fresh plan
    assert a == b
    assert list(a) == list(b)
    for text in a.values():
        assert text.endswith("\n") and "\r" not in text and "\t" not in text
        assert "{{" not in text and "{%" not in text


# ============================================================================== file names
def test_file_names_single_kernel() -> None:
    ks = _ks("Tiny")
    assert ks.plan.n_chunks == 1
    parts = render_parts(ks)
    assert list(parts) == ["k_tiny_q0.cu", "k_tiny_x0.cu", "exps_xinv.cu"]
    # a small kernel is ONE device TU of its own (one nvcc run): its parts' texts, in
    # order; the generic inverse kernel (Tiny has an expression no hint inverts) alone in the TU that
    # every kernel shares (an object-cache hit); and its launch table (host data: the generic
    # launcher exps_runtime.cpp reads it)
    files = render(ks)
    assert list(files) == ["k_tiny_q0_x0.cu", "exps_xinv.cu", "k_tiny_abi.cpp"]
    assert files["k_tiny_q0_x0.cu"] == parts["k_tiny_q0.cu"] + parts["k_tiny_x0.cu"]
    assert files["exps_xinv.cu"] == parts["exps_xinv.cu"]
    assert device_tus(files) == ["k_tiny_q0_x0.cu", "exps_xinv.cu"]


def _table(abi: str) -> tuple[list[tuple[int, str]], list[tuple[int, int, str]]]:
    """(lib, chunk) of every Q kernel and (expId, lib, expId of its symbol) of every expression of
    a launch table's text, in table order."""
    q = [(int(lib), c) for lib, c in re.findall(r'\{(\d+), "_Z\d+\w+?_q_c(\d+)_kPK11StepsParams', abi)]
    x = [(int(e), int(lib), s) for e, lib, s in
         re.findall(r'\{(\d+)ull, (\d+), "_Z\d+\w+?_x_e(\d+)_kPK11StepsParams', abi)]
    return q, x


def test_file_names_without_expressions() -> None:
    ks = _ks("Tiny", exprs=lambda xs: [])
    files = render_parts(ks)
    assert sorted(files) == ["k_tiny_q0.cu"]
    r = render(ks)
    assert list(r) == ["k_tiny_q0.cu", "k_tiny_abi.cpp"]
    abi = r["k_tiny_abi.cpp"]
    assert _table(abi) == ([(0, "0")], []) and "exps_x[]" not in abi
    assert "exps_q, 0ull, 0," in abi             # no expression table: exps_launch_expr covers nothing


def _q_groups(sizes: list[int]) -> list[list[int]]:
    """A chunked Q's chunk groups as the emitter's rule says: consecutive chunks, each group at most
    Q_TU_OPS ops (a chunk alone when it is larger), the last chunk alone."""
    groups: list[list[int]] = [[]]
    for c, n in enumerate(sizes[:-1]):
        if groups[-1] and sum(sizes[i] for i in groups[-1]) + n > emit.Q_TU_OPS:
            groups.append([])
        groups[-1].append(c)
    return groups + [[len(sizes) - 1]]


def test_file_names_chunked_large() -> None:
    ks = _ks("Large", 256, passes=False)
    n = len(ks.q.ops)
    assert n == 5394 and ks.plan.n_chunks == 22
    files = render_parts(ks)
    # chunks 0-20 in TUs of consecutive chunks of at most Q_TU_OPS = 1,024 ops, the last one (the
    # exact program) alone; each a TU of its own, then the expressions', then the generic inverse
    # kernel's
    groups = _q_groups([b - a for a, b in ks.plan.chunks])
    assert len(groups) == 7 and groups[-1] == [21]
    qs = [f"k_large_q{g}.cu" for g in range(7)]
    assert sorted(files) == sorted(["exps_xinv.cu", *qs, "k_large_x0.cu"])
    r = render(ks)
    assert r == {**{n: files[n] for n in qs}, "k_large_x0.cu": files["k_large_x0.cu"],
                 "exps_xinv.cu": files["exps_xinv.cu"], "k_large_abi.cpp": r["k_large_abi.cpp"]}
    assert list(r) == [*qs, "k_large_x0.cu", "exps_xinv.cu", "k_large_abi.cpp"]
    for n, g in zip(qs, groups):
        assert re.findall(r"EXPS_HD void k[0-9a-f]{16}_q_c(\d+)\(", files[n]) == [str(c) for c in g]
    # the launch table lists every chunk kernel in launch order, each in its device TU's fatbin
    q, x = _table(r["k_large_abi.cpp"])
    assert q == [(next(i for i, g in enumerate(groups) if c in g), str(c)) for c in range(22)]
    assert [e for e, _, _ in x] == sorted(xk.ir.exp_id for xk in ks.exprs)
    assert all(lib == 7 and str(e) == s for e, lib, s in x)
    assert all(f'.incbin \\"f{i}.fatbin\\"' in r["k_large_abi.cpp"] for i in range(9))
    # each TU of chunk kernels has a bounded twin slot (build/bounds.py) after the 9 device TUs: its
    # fatbin only under EXPS_TWIN_TU_<slot>, a chunk's twin kernel only under EXPS_TWIN_C<chunk>
    abi = r["k_large_abi.cpp"]
    assert re.findall(r'#if EXPS_TWIN_TU_(\d+)\n.*\n\s*"exps_fatbin_(\d+):\\n\\t.incbin \\"f(\d+).fatbin', abi) == \
        [(str(9 + g),) * 3 for g in range(7)]
    assert "f16.fatbin" not in abi and "16u, EXPS_FATBINS" in abi
    twin_q = re.findall(r'#if EXPS_TWIN_C(\d+)\n    \{(\d+), "_Z\d+\w+?_q_c(\d+)_kbPK11StepsParams', abi)
    lib_of = {c: g for g, cs in enumerate(groups) for c in cs}
    assert twin_q == [(str(c), str(9 + lib_of[c]), str(c)) for c in range(22)]
    qn = [q_part(ks, c)["kname"] for c in range(22)]
    sym = {c: (kernel_symbol(f"{qn[c]}_k", Q_PARAMS), kernel_symbol(f"{qn[c]}_kb", Q_PARAMS)) for c in range(22)}
    assert tu_twins(ks) == [{"tu": qs[g], "lib": 9 + g, "chunks": [[c, *sym[c]] for c in cs]}
                            for g, cs in enumerate(groups)]
    xn = {int(d["exp_id"]): d["kname"] for d in x_parts(ks)}
    assert tu_kernels(ks) == {
        **{qs[g]: [sym[c][0] for c in cs] for g, cs in enumerate(groups)},
        "k_large_x0.cu": [kernel_symbol(f"{xn[xk.ir.exp_id]}_{k}", X_PARAMS)
                          for xk in sorted(ks.exprs, key=lambda xk: xk.ir.exp_id)
                          for k in (("k", "ki") if xk.inv else ("k",))],
        "exps_xinv.cu": [kernel_symbol("exps_x_inv_k", XINV_PARAMS)]}
    # an expression some hint inverts has its own inverse kernel; the others (44 and 68 are the
    # sample Large's hint denominators) share the kernel's generic inverse kernel
    assert sorted(xk.ir.exp_id for xk in ks.exprs if xk.inv) == [44, 68]
    for xk in ks.exprs:
        w, i = (kernel_symbol(f"{xn[xk.ir.exp_id]}_{k}", X_PARAMS) for k in ("k", "ki"))
        assert (f'"{w}", "{i}", ' if xk.inv else f'"{w}", 0, ') in abi, xk.ir.exp_id
    # the table's generic inverse kernel: lib 8, the fatbin of exps_xinv.cu (device_tus order: last)
    assert device_tus(r)[8] == "exps_xinv.cu"
    assert f'8u, "{kernel_symbol("exps_x_inv_k", XINV_PARAMS)}", EXPS_HOST_FORM(exps_x_inv_h),' in abi


def test_file_names_small_tu_limit() -> None:
    ks = _ks("Medium", 64)
    sizes = [len(x.ir.ops) for x in ks.exprs]
    files = render_parts(ks, tu_ops=40)
    qn = sorted(int(m) for f in files for m in re.findall(r"^k_medium_q(\d+)\.cu$", f))
    xn = sorted(int(m) for f in files for m in re.findall(r"^k_medium_x(\d+)\.cu$", f))
    assert qn == list(range(len(qn))) and xn == list(range(len(xn)))
    assert len(qn) == ks.plan.n_chunks      # 64-op chunks each exceed a 40-op TU
    # x groups: consecutive expressions, every one exactly once, at most 40 ops unless alone
    seen, group_of = [], {}
    for g in xn:
        ids = [int(i) for i in re.findall(r"EXPS_HD gl3 k[0-9a-f]{16}_x_e(\d+)\(", files[f"k_medium_x{g}.cu"])]
        ops = sum(len(x.ir.ops) for x in ks.exprs if x.ir.exp_id in ids)
        assert ops <= 40 or len(ids) == 1
        seen += ids
        group_of.update({i: f"k_medium_x{g}.cu" for i in ids})
    assert seen == [x.ir.exp_id for x in ks.exprs]
    assert sum(sizes) > 40 and len(xn) > 1
    # packed: every part over 40 ops stays alone, and so does the generic inverse kernel's; the
    # launch table comes last
    assert list(files)[-1] == "exps_xinv.cu"
    packed = render(ks, tu_ops=40)
    assert list(packed) == list(files) + ["k_medium_abi.cpp"]
    assert "".join(packed[n] for n in files) == "".join(files.values())
    # the table finds every expression in the fatbin of its own TU (device_tus order), by expId
    tus = device_tus(packed)
    _, x = _table(packed["k_medium_abi.cpp"])
    assert [e for e, _, _ in x] == sorted(group_of)
    assert all(tus[lib] == group_of[e] for e, lib, _ in x)


# ================================================================= the generic inverse kernel's TU
def _inv_holders(files: dict[str, str]) -> list[str]:
    """The device TUs that define the generic inverse kernel or its host form."""
    return [n for n, text in files.items()
            if n.endswith(".cu") and ("exps_x_inv_k(" in text or "exps_x_inv_h(" in text)]


@pytest.mark.parametrize("name,opc,tu_ops", [("Tiny", None, TU_OPS), ("Tiny", None, 1), ("Medium", 64, 40),
                                             ("Large", 256, TU_OPS)])
def test_generic_inverse_kernel_is_a_tu_of_its_own(name: str, opc, tu_ops: int) -> None:
    """A kernel with an expression no hint inverts has the generic inverse
    kernel alone in `exps_xinv.cu`, its last device TU, whatever the TU limit (never packed with
    another part); no other TU defines it or its host form; the launch table's `inv` names it
    (lib = that TU's fatbin index, the build's name check expects exactly that kernel there)."""
    ks = _ks(name, opc)
    key = ks.key
    assert any(not x.inv for x in ks.exprs) and emit.generic_inverse_tu(ks) == "exps_xinv.cu"
    files = render(ks, tu_ops=tu_ops)
    tus = device_tus(files)
    assert tus[-1] == "exps_xinv.cu" and _inv_holders(files) == ["exps_xinv.cu"]
    assert files["exps_xinv.cu"] == render_parts(ks, tu_ops=tu_ops)["exps_xinv.cu"]
    assert "EXPS_HD" not in files["exps_xinv.cu"] and key not in files["exps_xinv.cu"]
    t = emit.launch_table(ks, tu_ops=tu_ops)
    assert t["tus"] == tus and t["inv"]["lib"] == len(tus) - 1
    assert t["inv"] == {"lib": len(tus) - 1, "sym": kernel_symbol("exps_x_inv_k", XINV_PARAMS), "host": "exps_x_inv_h"}
    assert all(k["lib"] < len(tus) - 1 for k in (*t["q"], *t["exprs"]))
    assert tu_kernels(ks, tu_ops=tu_ops)["exps_xinv.cu"] == [kernel_symbol("exps_x_inv_k", XINV_PARAMS)]
    abi = files[f"{key}_abi.cpp"]
    assert f'    {len(tus) - 1}u, "{kernel_symbol("exps_x_inv_k", XINV_PARAMS)}", EXPS_HOST_FORM(exps_x_inv_h),' in abi
    assert f"//   f{len(tus) - 1}.fatbin: exps_xinv.cu\n" in abi


def test_generic_inverse_tu_text_is_the_same_in_every_kernel() -> None:
    """Its text names no key, group or expression: byte-identical in two different kernels (Tiny's
    and Large's, other keys, other TU layouts), so one object-cache entry serves every kernel."""
    a, b = _ks("Tiny"), _ks("Large", 256)
    ta, tb = render(a)["exps_xinv.cu"], render(b, tu_ops=40)["exps_xinv.cu"]
    assert ta.encode() == tb.encode()
    assert ta.count("exps_x_inv_k(") == 1 and ta.count("void exps_x_inv_h(") == 1
    assert ta.startswith("// Generated by exps-codegen: the generic inverse kernel.")
    assert f'#include "{emit.COMMON_HEADER}"' in ta


def test_no_generic_inverse_tu_when_every_expression_has_its_own() -> None:
    """Every expression inverted by a hint (each has a `_ki`), or none at all: no `exps_xinv.cu`,
    no generic inverse kernel anywhere, the table's `inv` entry empty (0u, 0, 0)."""
    for exprs in (lambda xs: [x for x in xs if x.inv], lambda xs: []):
        ks = _ks("Medium", exprs=exprs)
        assert all(x.inv for x in ks.exprs) and emit.generic_inverse_tu(ks) is None
        files = render(ks)
        assert not any(n.endswith("_xinv.cu") for n in files) and _inv_holders(files) == []
        assert emit.launch_table(ks)["inv"] is None
        assert "    0u, 0, 0,\n" in files["k_medium_abi.cpp"] and "exps_x_inv" not in files["k_medium_abi.cpp"]
        assert all(not n.endswith("_xinv.cu") for n in tu_kernels(ks))
    ks = _ks("Medium", exprs=lambda xs: [x for x in xs if x.inv])
    assert ks.exprs and device_tus(render(ks)) == ["k_medium_q0_x0.cu"]


def test_pack_never_joins_the_generic_inverse_part() -> None:
    """`pack` keeps `exps_xinv.cu` a TU of its own, weighed or not (a part of weight 0 otherwise
    joins the TU before it), and starts a new TU after it."""
    parts = {"k_q0.cu": "a", "k_x0.cu": "b", "exps_xinv.cu": "c", "k_x1.cu": "d"}
    assert pack("k", parts, {"k_q0.cu": 1, "k_x0.cu": 1, "k_x1.cu": 1}) == {
        "k_q0_x0.cu": "ab", "exps_xinv.cu": "c", "k_x1.cu": "d"}
    assert pack("k", parts, {"exps_xinv.cu": 0}) == {"k_q0_x0.cu": "ab", "exps_xinv.cu": "c", "k_x1.cu": "d"}


def test_a_chunked_qs_tus_are_chunk_groups_with_the_last_chunk_alone() -> None:
    """A chunked Q: its chunk kernels in TUs of their own of about Q_TU_OPS ops (a constant's edit
    recompiles one of them), its last chunk (the exact program: every literal of Q) alone, then
    the expressions' TU and the generic inverse kernel's, last; a single kernel packs with the
    expressions as before."""
    ks = _ks("Medium", 64)
    n = ks.plan.n_chunks
    sizes = [b - a for a, b in ks.plan.chunks]
    assert n >= 3 and sum(sizes[:-1]) <= emit.Q_TU_OPS
    assert emit._tu_groups(ks, TU_OPS) == [["k_medium_q0.cu"], ["k_medium_q1.cu"], ["k_medium_x0.cu"],
                                           ["exps_xinv.cu"]]
    files = render(ks)
    assert device_tus(files) == ["k_medium_q0.cu", "k_medium_q1.cu", "k_medium_x0.cu", "exps_xinv.cu"]
    chunks_of = {t: {int(c) for c in re.findall(r"k[0-9a-f]{16}_q_c(\d+)_k\b", files[t])}
                 for t in ("k_medium_q0.cu", "k_medium_q1.cu")}
    assert chunks_of == {"k_medium_q0.cu": set(range(n - 1)), "k_medium_q1.cu": {n - 1}}   # the last, alone
    # at a lower limit the other chunks split in groups of consecutive chunks within it
    groups, _ = emit._part_names(ks, 2 * max(sizes))
    assert groups[-1] == [n - 1] and [c for g in groups for c in g] == list(range(n))
    assert all(sum(sizes[c] for c in g) <= 2 * max(sizes) for g in groups[:-1])
    single = _ks("Medium", 0)
    assert emit._tu_groups(single, TU_OPS) == [["k_medium_q0.cu", "k_medium_x0.cu"], ["exps_xinv.cu"]]


# ============================================================================ the op table
def _all_lowered_shapes() -> set[tuple[str, str]]:
    """Every (arith, shape) ir.lower produces over all operand kinds, dims, ops and orders."""
    si = StarkInfo("s", "S", 0, 0, 3, 4, 2, (0, 1), (CmPol(1, 1, 0), CmPol(2, 3, 0)), 1, 1, 1, 1, (1, 2),
                   (2, 1), (1, 2), ("everyRow",), 9, 3, 0)
    leaves = [Operand("cm", 1, id=0), Operand("cm", 3, id=1), Operand("const", 1, id=0),
              Operand("number", 1, value=3), Operand("public", 1, id=0), Operand("challenge", 3, id=0),
              Operand("eval", 3, id=0), Operand("airvalue", 1, id=0), Operand("airvalue", 3, id=1),
              Operand("airgroupvalue", 3, id=0), Operand("airgroupvalue", 1, id=1),
              Operand("proofvalue", 1, id=0), Operand("proofvalue", 3, id=1), Operand("Zi", 1)]
    seen = set()
    for op, (a, b) in itertools.product(("add", "sub", "mul"), itertools.product(leaves + ["t1", "t3"],
                                                                                  repeat=2)):
        steps = [Step("mul", Operand("tmp", 1, id=0), (Operand("cm", 1, id=0), Operand("cm", 1, id=0))),
                 Step("mul", Operand("tmp", 3, id=1), (Operand("cm", 3, id=1), Operand("cm", 3, id=1)))]
        srcs = [Operand("tmp", 1, id=0) if x == "t1" else Operand("tmp", 3, id=1) if x == "t3" else x
                for x in (a, b)]
        d = max(s.dim for s in srcs)
        steps.append(Step(op, Operand("tmp", d, id=2), tuple(srcs)))
        r = lower(si, Expression(0, 9, 3, tuple(steps)), extended=True)
        assert isinstance(r, KernelIR), r
        seen.add((r.ops[-1].arith, r.ops[-1].shape))
    for src in leaves + [Operand("tmp", 1, id=0)]:
        steps = [Step("mul", Operand("tmp", 1, id=0), (Operand("cm", 1, id=0), Operand("cm", 1, id=0))),
                 Step("copy", Operand("tmp", src.dim, id=5), (src,))]
        r = lower(si, Expression(0, 9, 3, tuple(steps)), extended=True)
        seen.add((r.ops[-1].arith, r.ops[-1].shape))
    return seen


def test_op_table_covers_everything_ir_produces() -> None:
    seen = _all_lowered_shapes()
    want = {(a, s) for a in ("add", "sub", "mul", "sub_swap") for s in ("11", "31", "33")} | \
        {("copy", "1"), ("copy", "3")}
    assert seen == want
    assert set(OP_C) == want


def test_op_table_texts() -> None:
    names = {0: "v0", 1: "v1"}
    ops = {
        Op("add", "11", Val(0, 1), Val(1, 1), 1): "const uint64_t v2 = gl_add(v0, v1);",
        Op("sub_swap", "11", Val(0, 1), Val(1, 1), 1): "const uint64_t v2 = gl_sub(v1, v0);",
        Op("sub_swap", "31", Val(0, 3), Val(1, 1), 3): "const gl3 v2 = gl3_rsub31(v0, v1);",
        Op("sub_swap", "33", Val(0, 3), Val(1, 3), 3): "const gl3 v2 = gl3_sub(v1, v0);",
        Op("mul", "31", Val(0, 3), Val(1, 1), 3): "const gl3 v2 = gl3_mul31(v0, v1);",
        Op("add", "33", Val(0, 3), Val(1, 3), 3): "const gl3 v2 = gl3_add(v0, v1);",
        Op("copy", "3", Val(0, 3), None, 3): "const gl3 v2 = v0;",
        Op("copy", "1", Leaf("number", 1, value=P), None, 1): f"const uint64_t v2 = {P}ull;",
    }
    for op, line in ops.items():
        assert emit._op_line(2, op, names) == line
    with pytest.raises(ValueError, match="no C rendering for op mul with shape 13"):
        emit._op_line(2, Op("mul", "13", Val(0, 1), Val(1, 3), 3), names)


# ============================================================================== leaf loads
@pytest.mark.parametrize("leaf,text", [
    (Leaf("number", 1, value=0), "0ull"),
    (Leaf("number", 1, value=1), "1ull"),
    (Leaf("number", 1, value=P - 1), "18446744069414584320ull"),
    (Leaf("number", 1, value=P), "18446744069414584321ull"),
    (Leaf("number", 1, value=(1 << 64) - 1), "18446744073709551615ull"),
])
def test_number_leaf_text(leaf: Leaf, text: str) -> None:
    assert emit._leaf_c(leaf) == text


LOAD_LEAVES = [
    Leaf("cm", 1, stage=1, col=2), Leaf("cm", 1, stage=1, col=0, shift=-1), Leaf("cm", 1, stage=2, col=0, shift=3),
    Leaf("cm", 3, stage=2, col=1, shift=1), Leaf("cm", 3, stage=2, col=1, shift=-7), Leaf("cm", 1, stage=3, col=2),
    Leaf("const", 1, col=1, shift=1), Leaf("const", 1, col=0, shift=-2), Leaf("public", 1, col=1),
    Leaf("challenge", 3, col=6), Leaf("eval", 3, col=3), Leaf("airvalue", 1, col=0), Leaf("airvalue", 3, col=1),
    Leaf("airgroupvalue", 3, col=0), Leaf("airgroupvalue", 1, col=3), Leaf("proofvalue", 1, col=0),
    Leaf("proofvalue", 3, col=1), Leaf("number", 1, value=P + 5),
]


def _want_leaf(leaf: Leaf, buf, n: int) -> np.ndarray:
    """(dim, n) words a load of `leaf` must give on the trace domain, straight from the buffers."""
    rows = (np.arange(n) + leaf.shift) % n
    if leaf.kind == "cm":
        off = buf.off_trace[leaf.stage]
        return np.stack([buf.aux[off + (leaf.col + d) * n + rows] for d in range(leaf.dim)])
    if leaf.kind == "const":
        return buf.const_trace[leaf.col * n + rows][None, :]
    if leaf.kind == "number":
        return np.full((1, n), leaf.value, dtype=np.uint64)
    vec = buf.scalars[{"public": "publics", "challenge": "challenges", "eval": "evals", "airvalue": "airvalues",
                       "airgroupvalue": "airgroupvalues", "proofvalue": "proofvalues"}[leaf.kind]]
    return np.stack([np.full(n, vec[leaf.col + d], dtype=np.uint64) for d in range(leaf.dim)])


@needs_gxx
def test_every_leaf_kind_loads_the_right_word(tmp_path: Path) -> None:
    """Each leaf kind, as a one-op expression (copy), compiled and run: the value is the buffer
    word the spec's read rules name (format-independent check of the leaf table); Zi through Q."""
    si = parse_starkinfo(SI_PROP, "s.json")
    exprs = [ExprKernel(KernelIR(i, False, (Op("copy", str(lf.dim), lf, None, lf.dim),)), False)
             for i, lf in enumerate(LOAD_LEAVES)]
    q = KernelIR(100, True, (Op("copy", "1", Leaf("zi", 1), None, 1),))
    ks = KernelSource("leaves", q, plan(q, 0), exprs, HASH)
    lib = hostcheck._load(hostcheck.build_host_library(render(ks), tmp_path))
    n, n_ext = 32, 64
    buf = hostcheck.make_buffers(si, n_ext, n, np.random.default_rng(5))
    steps = buf.bind(hostcheck.HostMem())
    for i, lf in enumerate(LOAD_LEAVES):
        dest = np.zeros(n * lf.dim, dtype=np.uint64)
        ok = lib.exps_launch_expr(i, steps, dest.ctypes.data, n, n, buf.off_trace[1], buf.off_trace[2],
                                  buf.off_trace[3], 0, 0, 0, lf.dim, lf.dim, 1, None)
        assert ok == 1
        got = dest.reshape(n, lf.dim).T
        assert np.array_equal(got, _want_leaf(lf, buf, n)), lf
    qbuf = np.zeros(3 * n_ext, dtype=np.uint64)
    lib.exps_launch(steps, qbuf.ctypes.data, 0, 0, n_ext, buf.off_ext[1], buf.off_ext[2], buf.off_ext[3],
                    buf.off_zi, None)
    assert np.array_equal(qbuf[:n_ext], buf.aux[buf.off_zi: buf.off_zi + n_ext])
    assert not qbuf[n_ext:].any()


def test_number_literals_in_rendered_text() -> None:
    vals = [0, 1, EPS, 1 << 32, P - 1, P, P + 1, (1 << 64) - 1, 1234567890123456789]
    ops = [Op("mul", "11", Leaf("cm", 1, stage=1, col=0), Leaf("number", 1, value=vals[0]), 1)]
    for v in vals[1:]:
        ops.append(Op("add", "11", Val(len(ops) - 1, 1), Leaf("number", 1, value=v), 1))
    ops.append(Op("mul", "11", Val(len(ops) - 1, 1), Leaf("zi", 1), 1))
    ir = KernelIR(3, True, tuple(ops))
    text = render_parts(KernelSource("num", ir, plan(ir, 0), [], HASH))["num_q0.cu"]
    assert "0x" not in text.split("Do not edit.")[1]      # the exact program's table too, if any
    # the kernel text (an exact program's table, before it, holds the same numbers as data)
    text = text[text.index("// Per-row work of chunk"):]
    found = re.findall(r"\b(\d+)ull\b", text)
    assert [int(x) for x in found] == vals
    assert all(re.fullmatch(r"0|[1-9]\d*", x) for x in found)          # decimal, no 0x / octal


@pytest.mark.parametrize("bad", [1 << 64, -1])
def test_number_out_of_range_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="number literal out of range"):
        emit._leaf_c(Leaf("number", 1, value=bad))


@pytest.mark.parametrize("x", ["5", "0; system(\"rm -rf /\")", 5.0, True, False, None, b"5", [5]])
def test_format_refuses_non_integers(x) -> None:
    with pytest.raises(TypeError, match="refusing to format non-integer"):
        emit._i(x)


def test_format_integers() -> None:
    assert [emit._i(x) for x in (0, 7, -3, 1 << 63)] == ["0", "7", "-3", str(1 << 63)]


@pytest.mark.parametrize("leaf", [
    Leaf("cm", 1, stage=1, col="0] + evil[0"),
    Leaf("cm", 1, stage="1", col=0),
    Leaf("cm", 1, stage=1, col=0, shift="1"),
    Leaf("const", 1, col=1.0),
    Leaf("public", 1, col="0"),
    Leaf("challenge", 3, col=1.5),
    Leaf("number", 1, value="7"),
])
def test_render_refuses_non_int_leaf_fields(leaf: Leaf) -> None:
    c0 = Leaf("cm", 1, stage=1, col=0)
    op = Op("mul", "31", leaf, c0, 3) if leaf.dim == 3 else Op("mul", "11", c0, leaf, 1)
    ir = KernelIR(3, True, (op,))
    with pytest.raises(TypeError):
        render(KernelSource("bad", ir, plan(ir, 0), [], HASH))


def test_render_refuses_non_int_exp_id_and_bad_hash_and_leaf_kind() -> None:
    ok = KernelIR(3, False, (Op("mul", "11", Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1), 1),))
    bad = KernelIR("3; evil()", False, ok.ops)
    with pytest.raises(TypeError):
        render(KernelSource("bad", ok, plan(ok, 0), [ExprKernel(bad, False)], HASH))
    with pytest.raises(ValueError, match="source hash must be hex"):
        render(KernelSource("bad", ok, plan(ok, 0), [], 'abc"); evil("'))
    with pytest.raises(ValueError, match="no C rendering for leaf kind 'x'"):
        emit._leaf_c(Leaf("x", 1))


def test_chunk_body_exact_lines() -> None:
    """Order of a chunk's lines: lazy scratch loads before the first use, each op, its stores
    right after it (leaf and scratch texts from emit's own formatters)."""
    c0, c1 = Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1)
    ch, zi = Leaf("challenge", 3, col=0), Leaf("zi", 1)
    L, S = emit._leaf_c, emit._scratch_c
    ir = KernelIR(1, True, (
        Op("add", "11", c0, c1, 1),
        Op("mul", "31", ch, c0, 3),
        Op("mul", "31", Val(1, 3), Val(0, 1), 3),
        Op("mul", "31", Val(2, 3), zi, 3),
    ))
    pl = plan(ir, 2)
    assert pl.slot_of == {0: 0, 1: 1}
    assert chunk_body(ir, pl, 0) == [
        f"const uint64_t v0 = gl_add({L(c0)}, {L(c1)});",
        f"{S(0, 0)} = v0;",
        f"const gl3 v1 = gl3_mul31({L(ch)}, {L(c0)});",
        f"{S(1, 0)} = v1.v0;",
        f"{S(1, 1)} = v1.v1;",
        f"{S(1, 2)} = v1.v2;",
    ]
    assert chunk_body(ir, pl, 1) == [
        f"const gl3 v1 = gl3_make({S(1, 0)}, {S(1, 1)}, {S(1, 2)});",
        f"const uint64_t v0 = {S(0, 0)};",
        "const gl3 v2 = gl3_mul31(v1, v0);",
        f"const gl3 v3 = gl3_mul31(v2, {L(zi)});",
    ]
    assert S(0, 0) != S(1, 0) != S(1, 1) != S(1, 2)
    assert emit.result_c(ir) == "v3"
    assert emit.result_c(KernelIR(1, False, ir.ops[:1])) == "gl3_make(v0, 0, 0)"


# ================================================================================ the ABI
ABI = ("exps_launch", "exps_min_scratch", "exps_expr_covered", "exps_launch_expr", "exps_emitter_version",
       "exps_source_hash")


def test_abi_text_has_every_entry_point() -> None:
    """The entry points are the generic launcher's (one text for every kernel); a kernel's launch
    table carries its identity and exports nothing."""
    runtime = (emit.TEMPLATES / emit.RUNTIME).read_text()
    for name in ABI:
        assert re.search(rf"EXPS_EXPORT [^;{{]*\b{name}\(", runtime), name
    assert 'extern "C" {' in runtime
    table = render(_ks("Medium"))["k_medium_abi.cpp"]
    assert f'"{EMITTER_VERSION}"' in table and HASH in table
    assert "EXPS_EXPORT" not in table and "visibility(\"default\")" not in table


@needs_gxx
def test_abi_exports_exactly_the_entry_points(tmp_path: Path) -> None:
    ks = _ks("Tiny", 3)
    so = hostcheck.build_host_library(render(ks), tmp_path)
    require("binutils")
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True,
                         check=True).stdout
    exported = sorted(line.split()[-1] for line in out.splitlines() if " T " in line)
    assert exported == sorted(ABI)
    lib = hostcheck._load(so)
    assert lib.exps_min_scratch() == ks.plan.total_slots * 256 > 0
    assert lib.exps_emitter_version() == EMITTER_VERSION.encode()
    assert lib.exps_source_hash() == HASH.encode()
    covered = sorted(x.ir.exp_id for x in ks.exprs)
    assert covered == [6, 11]
    for e in (6, 11):
        assert lib.exps_expr_covered(e) == 1
    for e in (0, 5, 7, 50, 51, 1 << 40):
        assert lib.exps_expr_covered(e) == 0


@needs_gxx
def test_abi_launch_expr_refusals(tmp_path: Path) -> None:
    ks = _ks("Tiny")
    lib = hostcheck._load(hostcheck.build_host_library(render(ks), tmp_path))
    si, _, _, _ = _air("Tiny")
    buf = hostcheck.make_buffers(si, 64, 16, np.random.default_rng(0))
    steps = buf.bind(hostcheck.HostMem())
    dest = np.zeros(3 * 16 * 4, dtype=np.uint64)
    dims = {x.ir.exp_id: x.ir.out_dim for x in ks.exprs}
    assert dims == {6: 1, 11: 3}

    def launch(exp_id, mode=0, dest_dim=3, n=16):
        return lib.exps_launch_expr(exp_id, steps, dest.ctypes.data, n, n,
                                    buf.off_trace[1], buf.off_trace[2], buf.off_trace[3], mode, 5, 0, 4,
                                    dest_dim, 0, None)

    assert launch(6) == 1 and launch(11) == 1 and launch(6, dest_dim=1) == 1
    assert launch(50) == 0                    # Q is not a trace-domain kernel
    assert launch(7) == 0
    assert launch(6, mode=3) == 0
    assert launch(6, dest_dim=2) == 0
    # the prover ignores the return value of a covered expression: every shape it can call is
    # computed (values: tests/test_hostcheck.py::test_launch_expr_every_shape)
    assert launch(6, n=0) == 1                # no row to write, still handled
    assert launch(11, dest_dim=1) == 1        # component 0 of a dim-3 value, as the interpreter
    assert launch(6, mode=2, dest_dim=3) == 1
    assert launch(11, mode=2, dest_dim=3) == 1


def test_source_hash() -> None:
    a = emit.source_hash("d" * 64, {"ops_per_chunk": 64, "arch": "90"})
    assert a == emit.source_hash("d" * 64, {"arch": "90", "ops_per_chunk": 64})
    assert re.fullmatch(r"[0-9a-f]{64}", a)
    assert len({a, emit.source_hash("e" * 64, {"ops_per_chunk": 64, "arch": "90"}),
                emit.source_hash("d" * 64, {"ops_per_chunk": 32, "arch": "90"})}) == 3


def test_source_hash_follows_the_templates(tmp_path: Path, monkeypatch) -> None:
    """An edit of gen_common.cuh (the arithmetic) or any template changes every source hash, so a
    `.so` of the old text is stale even if EMITTER_VERSION was not bumped."""
    a = emit.source_hash("d" * 64, {"arch": "90"})
    t = tmp_path / "templates"
    shutil.copytree(emit.TEMPLATES, t)
    monkeypatch.setattr(emit, "TEMPLATES", t)
    emit.templates_digest.cache_clear()
    try:
        assert emit.source_hash("d" * 64, {"arch": "90"}) == a       # same bytes, same hash
        emit.templates_digest.cache_clear()
        h = t / emit.COMMON_HEADER
        h.write_text(h.read_text().replace("gl_add", "gl_add_", 1))
        assert emit.source_hash("d" * 64, {"arch": "90"}) != a
    finally:
        emit.templates_digest.cache_clear()


# ========================================================================= a 40,000-op Q
def test_no_fixed_op_cap(tmp_path: Path) -> None:
    """A Q of more than the original's 40,000-op CAP gets a kernel by default (chunking
    builds any Q); a cap is only an explicit user knob."""
    synth.build_large(tmp_path, 45000)
    [p] = discover(tmp_path)
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    assert cov.air_skip == "" and len(cov.q.ops) > 40000
    capped = cover(si, ei, cap=40000)
    assert capped.air_skip == f"Q has {len(cov.q.ops)} ops > cap 40000 (the cap= / --cap limit)"


def test_render_40000_op_q(tmp_path: Path) -> None:
    synth.build_large(tmp_path, 40000)
    [p] = discover(tmp_path)
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    assert cov.air_skip == "" and len(cov.q.ops) == 39998
    ks = KernelSource(p.key, cov.q, plan(cov.q, 256), cov.exprs, HASH, passes=False)
    files = render(ks)
    assert ks.plan.n_chunks == 157
    # the Q TUs (`_q_groups`), the expressions', the generic inverse kernel's, the launch table
    n_q = len(_q_groups([b - a for a, b in ks.plan.chunks]))
    assert 40 <= n_q <= 50
    qfiles = [f"{p.key}_q{g}.cu" for g in range(n_q)]
    assert list(files) == qfiles + [f"{p.key}_x0.cu", "exps_xinv.cu", f"{p.key}_abi.cpp"]
    # every op is emitted exactly once, in order, across the TUs (a word v<i> or accumulators a<i>)
    defs = []
    for f in qfiles:
        q_part = files[f].split("// Generated by exps-codegen: trace-domain")[0]
        defs += [int(m) for m in re.findall(r"^    const (?:uint64_t v|gl3 v|gl3_acc a|gl_acc a)(\d+) = (?!gl3_make\(scratch|scratch|gl3_make\(\(\*\(uint64_t\*\)\(exps_sb|\(\*\(uint64_t\*\)\(exps_sb)",
                                            q_part, flags=re.M)]
    assert defs == list(range(39998))


# ====================================================== random DAGs end to end (host check)
SI_PROP = {
    "name": "Prop", "airgroupId": 0, "airId": 0, "nStages": 2,
    "starkStruct": {"nBits": 3, "nBitsExt": 4},
    "cmPolsMap": [{"stage": 1, "dim": 1, "stagePos": 0}, {"stage": 1, "dim": 1, "stagePos": 1},
                  {"stage": 1, "dim": 1, "stagePos": 2}, {"stage": 2, "dim": 1, "stagePos": 0},
                  {"stage": 2, "dim": 3, "stagePos": 1}, {"stage": 3, "dim": 3, "stagePos": 0}],
    "mapSectionsN": {"const": 2, "cm1": 3, "cm2": 4, "cm3": 3},
    "openingPoints": [-1, 0, 1, 2],
    "boundaries": [{"name": "everyRow"}],
    "nConstants": 2, "nPublics": 2,
    "challengesMap": [{"stage": 2}, {"stage": 2}, {"stage": 3}],
    "evMap": [{"type": "cm", "id": 0}, {"type": "const", "id": 1}],
    "airValuesMap": [{"stage": 1}, {"stage": 2}],
    "airgroupValuesMap": [{"stage": 2}, {"stage": 1}],
    "proofValuesMap": [{"stage": 1}, {"stage": 2}],
    "cExpId": 100, "qDim": 3,
}
NUMBERS = [0, 1, 2, P - 1, P, P + 1, (1 << 64) - 1, EPS, EPS + 1, 1 << 32, 16]
COLUMN_LEAVES = [("cm", 0), ("cm", 1), ("cm", 2), ("cm", 3), ("cm", 4), ("const", 0), ("const", 1)]


@st.composite
def leaves(draw, q: bool, column: bool = False) -> dict:
    if column:
        kind = draw(st.sampled_from(["cm", "const"]))
    else:
        kinds = ["cm", "cm", "cm", "const", "number", "number", "public", "challenge", "eval", "airvalue",
                 "airgroupvalue", "proofvalue"] + (["Zi"] if q else [])
        kind = draw(st.sampled_from(kinds))
    prime = draw(st.sampled_from(SI_PROP["openingPoints"]))
    if kind == "cm":
        i = draw(st.integers(0, 4))
        return {"type": "cm", "id": i, "prime": prime, "dim": SI_PROP["cmPolsMap"][i]["dim"]}
    if kind == "const":
        return {"type": "const", "id": draw(st.integers(0, 1)), "prime": prime, "dim": 1}
    if kind == "number":
        v = draw(st.one_of(st.sampled_from(NUMBERS), st.integers(0, (1 << 64) - 1)))
        return {"type": "number", "value": draw(st.sampled_from([str(v), v])), "dim": 1}
    if kind == "public":
        return {"type": "public", "id": draw(st.integers(0, 1)), "dim": 1}
    if kind in ("challenge", "eval"):
        return {"type": kind, "id": draw(st.integers(0, 2 if kind == "challenge" else 1)), "dim": 3}
    if kind == "Zi":
        return {"type": "Zi", "boundaryId": 0, "dim": 1}
    i = draw(st.integers(0, 1))
    maps = {"airvalue": "airValuesMap", "airgroupvalue": "airgroupValuesMap", "proofvalue": "proofValuesMap"}
    stage = SI_PROP[maps[kind]][i]["stage"]
    return {"type": kind, "id": i, "stage": stage, "dim": 1 if stage == 1 else 3}


@st.composite
def dags(draw, q: bool, max_ops: int = 24) -> list[dict]:
    """A random SSA code list; unread (dead) values are folded into the result or left dead."""
    n = draw(st.integers(1, max_ops))
    ids = iter(draw(st.permutations(range(3, 3 + 2 * n)))[:n] + list(range(100, 200)))  # sparse ids
    code: list[dict] = []
    outs: list[dict] = []
    read: set[int] = set()

    def operand() -> dict:
        if outs and draw(st.integers(0, 9)) < 5:
            o = dict(draw(st.sampled_from(outs[-6:] if draw(st.booleans()) else outs)))
            read.add(o["id"])
            return o
        return draw(leaves(q))

    def add_op(op: str, srcs: list[dict]) -> None:
        d = max(s["dim"] for s in srcs)
        tid = next(ids)
        code.append({"op": op, "dest": {"type": "tmp", "id": tid, "dim": d}, "src": srcs})
        outs.append({"type": "tmp", "id": tid, "dim": d})

    for _ in range(n):
        if draw(st.integers(0, 11)) == 0:
            add_op("copy", [operand()])
        else:
            srcs = [operand(), operand()]
            if draw(st.booleans()):
                srcs.reverse()                                 # both JSON operand orders
            add_op(draw(st.sampled_from(["add", "add", "sub", "mul"])), srcs)
    # fold the values nobody read into the result (long live ranges across chunks), or keep
    # them dead (they must not break the build either)
    fold = draw(st.booleans())
    for o in [o for o in outs[:-1] if o["id"] not in read and fold]:
        srcs = [dict(outs[-1]), dict(o)]
        read.update((outs[-1]["id"], o["id"]))
        if draw(st.booleans()):
            srcs.reverse()
        add_op(draw(st.sampled_from(["add", "sub", "mul"])), srcs)
    return code


@st.composite
def airs(draw, opc: int) -> tuple[dict, dict, int]:
    """(starkinfo, expressionsinfo, n trace-domain expressions) with a random Q and 1-2 trace
    expressions (one may be the denominator of a dim-1 numerator)."""
    q_code = draw(dags(q=True))
    last = q_code[-1]["dest"]
    zi = {"type": "Zi", "boundaryId": 0, "dim": 1}
    src = [{"type": "tmp", "id": last["id"], "dim": last["dim"]}, zi]
    if draw(st.booleans()):
        src.reverse()
    q_code.append({"op": "mul", "dest": {"type": "q", "id": 0, "dim": last["dim"]}, "src": src})
    si = dict(SI_PROP, qDim=last["dim"])
    exprs = [{"expId": 100, "stage": 3, "code": q_code}]
    n_trace = draw(st.integers(1, 2))
    for k in range(n_trace):
        exprs.append({"expId": 10 + k, "stage": 2, "code": draw(dags(q=False))})
    hints = []
    if n_trace == 2 and draw(st.booleans()):
        d0 = exprs[1]["code"][-1]["dest"]["dim"]
        d1 = exprs[2]["code"][-1]["dest"]["dim"]
        hints.append({"name": "im_col", "fields": [
            {"name": "numerator", "values": [{"op": "tmp", "id": 10, "dim": d0}]},
            {"name": "denominator", "values": [{"op": "tmp", "id": 11, "dim": d1}]}]})
    draw(st.randoms()).shuffle(exprs)
    return si, {"expressionsCode": exprs, "hintsInfo": hints}, n_trace


def run_end_to_end(si_json: dict, ei_json: dict, n_trace: int, opc: int) -> hostcheck.CheckResult:
    si = parse_starkinfo(si_json, "prop.starkinfo.json")
    ei = parse_expressionsinfo(ei_json, "prop.expressionsinfo.json", si)
    cov = cover(si, ei)
    assert cov.air_skip == ""
    assert len(cov.exprs) == n_trace and cov.skipped_exprs == []
    ks = hostcheck.kernel_source("prop", cov, opc, HASH)
    assert ks.q_in is cov.q and ks.pass_stats.ops_out <= len(cov.q.ops)
    n_given = -(-len(cov.q.ops) // opc) if 0 < opc < len(cov.q.ops) else 1
    # the IR after the passes, re-planned into at most as many chunks as given; then the cheap
    # values that cross a cut recomputed where they are read (codegen.remat): no load left of one
    assert ks.plan == plan_chunks(ks.q, ks.plan.ops_per_chunk, ks.plan.chunks) and 1 <= ks.plan.n_chunks <= n_given
    chunk_of = [c for c, (a, b) in enumerate(ks.plan.chunks) for _ in range(a, b)]
    rec = recomputable(ks.q)
    for v in {v for ch in ks.plan.loads for v in ch if rec[v]}:
        # kept stored only where recomputing would leave its chunk empty: a chunk of cheap values
        a, b = ks.plan.chunks[chunk_of[v]]
        assert all(rec[i] for i in range(a, b))
    if ks.remat_copies == 0:
        assert len(ks.q.ops) == ks.pass_stats.ops_out and ks.plan == plan(ks.q, ks.plan.ops_per_chunk)
    else:
        assert ks.plan.n_chunks > 1 and len(ks.q.ops) <= ks.pass_stats.ops_out + ks.remat_copies
    chunked = ks.plan.n_chunks > 1
    with tempfile.TemporaryDirectory(prefix="exps-prop-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(render(ks), Path(d)))
        res = hostcheck.check_kernel(si, si_json, ei_json, ks, lib, seed=7)
    assert res.mismatches == []
    assert res.q_words == 3 * 1024 * (3 if chunked else 1)
    want_checks = 13 * len(cov.exprs)       # hostcheck.EXPR_CASES (12) + one N == 0 call each
    assert res.expr_checks == want_checks
    return res


EXAMPLES = int(os.environ.get("EXPS_PROP_EXAMPLES", "10"))


@needs_gxx
@pytest.mark.parametrize("opc", [0, 3, 7])
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_dags_bit_identical(opc: int, data) -> None:
    si, ei, n_trace = data.draw(airs(opc))
    run_end_to_end(si, ei, n_trace, opc)


# ----------------------------------------------------- kernels that read no column (row unused)
def _scalar_only_air(trace_code: list[dict]) -> tuple[dict, dict]:
    q = [{"op": "mul", "dest": {"type": "tmp", "id": 0, "dim": 1},
          "src": [{"type": "cm", "id": 0, "prime": 0, "dim": 1}, {"type": "cm", "id": 1, "prime": 1, "dim": 1}]},
         {"op": "mul", "dest": {"type": "q", "id": 0, "dim": 1},
          "src": [{"type": "tmp", "id": 0, "dim": 1}, {"type": "Zi", "boundaryId": 0, "dim": 1}]}]
    return dict(SI_PROP, qDim=1), {"expressionsCode": [{"expId": 100, "code": q},
                                                       {"expId": 10, "code": trace_code}]}


@needs_gxx
@pytest.mark.parametrize("src", [
    [{"type": "public", "id": 0, "dim": 1}, {"type": "number", "value": "5", "dim": 1}],
    [{"type": "number", "value": "3", "dim": 1}, {"type": "number", "value": "5", "dim": 1}],
])
def test_trace_expression_without_column_reads(src) -> None:
    """Regression (BUG-1): an expression reading no column left `row` (and `X` with literals only)
    unused; -Wextra made the host build fail (Medium's expression 42 in the sample)."""
    si, ei = _scalar_only_air([{"op": "mul", "dest": {"type": "tmp", "id": 0, "dim": 1}, "src": src}])
    run_end_to_end(si, ei, 1, 0)


@needs_gxx
def test_q_chunk_without_column_reads(tmp_path: Path) -> None:
    """Regression (BUG-1): a Q chunk (not the last) reading no column/Zi left `row`, `X` unused."""
    ops = (Op("mul", "11", Leaf("number", 1, value=3), Leaf("number", 1, value=5), 1),
           Op("add", "11", Val(0, 1), Leaf("cm", 1, stage=1, col=0), 1),
           Op("mul", "11", Val(1, 1), Leaf("zi", 1), 1))
    ir = KernelIR(9, True, ops)
    hostcheck.build_host_library(render(KernelSource("k", ir, plan(ir, 1), [], HASH)), tmp_path)


@needs_gxx
def test_chunked_q_without_scratch(tmp_path: Path) -> None:
    """Regression: a chunked plan where no value crosses a cut (0 scratch slots) once
    rendered `slots ? scratchElems / (slots * 256) : 512` with a literal 0; g++ -Wdiv-by-zero
    failed the host build on some hypothesis draws. The branch is now decided from the plan."""
    ops = (Op("mul", "11", Leaf("cm", 1, stage=1, col=0), Leaf("number", 1, value=5), 1),
           Op("add", "11", Leaf("cm", 1, stage=1, col=1), Leaf("number", 1, value=3), 1),
           Op("mul", "11", Leaf("cm", 1, stage=1, col=0), Leaf("zi", 1), 1))
    ir = KernelIR(9, True, ops)
    pl = plan(ir, 1)
    assert (pl.n_chunks, pl.total_slots) == (3, 0)
    files = render(KernelSource("k", ir, pl, [], HASH, passes=False))
    assert "3ull, 0ull, 0ull, EXPS_SINGLE_SHAPE" in files["k_abi.cpp"]   # chunks, slots, min scratch
    lib = hostcheck._load(hostcheck.build_host_library(files, tmp_path))
    assert lib.exps_min_scratch() == 0


@needs_gxx
def test_medium_sample_builds(tmp_path: Path) -> None:
    hostcheck.build_host_library(render(_ks("Medium")), tmp_path)


# ------------------------------------- dead values (once emitted as unused locals: a warning)
@needs_gxx
@pytest.mark.parametrize("where", ["trace", "q"])
def test_dead_value(where: str) -> None:
    cm0 = {"type": "cm", "id": 0, "prime": 0, "dim": 1}
    cm1 = {"type": "cm", "id": 1, "prime": 1, "dim": 1}
    code = [{"op": "mul", "dest": {"type": "tmp", "id": 0, "dim": 1}, "src": [cm0, cm1]},   # never read
            {"op": "add", "dest": {"type": "tmp", "id": 1, "dim": 1}, "src": [cm1, cm0]}]
    if where == "trace":
        si, ei = _scalar_only_air(code)
    else:
        si, ei = _scalar_only_air([{"op": "add", "dest": {"type": "tmp", "id": 0, "dim": 1}, "src": [cm0, cm1]}])
        ei["expressionsCode"][0]["code"] = code + [
            {"op": "mul", "dest": {"type": "q", "id": 0, "dim": 1},
             "src": [{"type": "tmp", "id": 1, "dim": 1}, {"type": "Zi", "boundaryId": 0, "dim": 1}]}]
    run_end_to_end(si, ei, 1, 0)


# ------------------------------------------- the field ops' GPU check (bench/fieldops.py)
def test_fieldops_inputs_hold_every_edge_pair() -> None:
    from bench import fieldops as F
    from codegen.check import gl64
    P, EPS = gl64.P, gl64.EPS
    need = {0, 1, 2, 3, P - 1, P, P + 1, EPS - 1, EPS, EPS + 1, (1 << 32) - 1, (1 << 32) + 1, 1 << 63,
            (1 << 64) - 1}
    assert need <= set(F.EDGE) and len(F.EDGE) == len(set(F.EDGE)) == 40
    k = len(F.EDGE)
    a, b = F.make_inputs("mul", 5000, 1)
    assert len(a) == len(b) == 5000
    assert set(zip(a[:k * k].tolist(), b[:k * k].tolist())) == {(x, y) for x in F.EDGE for y in F.EDGE}
    a3, b3 = F.make_inputs("mul33", 20000, 1)
    assert a3.shape == b3.shape == (20000, 3)
    for i in range(3):          # every edge pair at every component pair (i, j)
        for j in range(3):
            got = set(zip(a3[: 9 * k * k, i].tolist(), b3[: 9 * k * k, j].tolist()))
            assert {(x, y) for x in F.EDGE for y in F.EDGE} <= got
    # the random part mixes the kinds of words (not only uniform ones)
    r = F.random_words(np.random.default_rng(0), 10000)
    assert np.isin(r, np.array(F.EDGE, dtype=np.uint64)).mean() > 0.15 and (r < 1000).mean() > 0.1


def test_fieldops_compare_reports_a_wrong_word() -> None:
    from bench import fieldops as F
    a, b = F.make_inputs("add", 2000, 3)
    want = F.oracle("add", a, b, 1)
    got = want.copy()
    got[17] ^= np.uint64(1)
    msg = F.first_diff(got, want, a, b)
    assert msg.startswith("1 words differ; first element 17:")


@requires("nvcc")
def test_fieldops_device_forms_compile(tmp_path: Path) -> None:
    """The header's device forms (EXPS_DEVICE_PTX) and its portable forms on the device both build
    for sm_90 into the check library (run on a GPU by bench/gpu_round.sh's fieldops phase), every
    kernel without a spill."""
    from bench import fieldops as F
    so, reports = F.build(tmp_path, "90")
    assert so.is_file() and set(reports) == set(F.VARIANTS) == {"cur", "port"}
    lib = F.load(so)                      # binds <ns>_check / <ns>_bench of every variant
    assert all(hasattr(lib, f"{ns}_sms") for ns in F.VARIANTS)
    for ns, text in reports.items():
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill", text)]
        assert "bench_k" in text and spills and not any(spills), ns


def test_offsets_and_the_launchers_descriptors_agree() -> None:
    """render_model.Offsets: every column word and scratch slot a kernel's lines read or write at an
    entry of its exps_offs, in first-use order (in a line, its columns before its zerofier), each
    (kind, index) once; the kinds and the table size are exps_abi.h's; past OFFS_MAX entries a load
    keeps its own arithmetic. In a trace-domain expression a stage-1 column is the trace's (kind
    TRACE, base exps_tb) and the zerofier keeps its own arithmetic."""
    abi = (emit.TEMPLATES / emit.ABI_HEADER).read_text()
    assert int(re.search(r"#define EXPS_MAX_OFFS (\d+)", abi)[1]) == render_model.OFFS_MAX
    kinds = {k: int(v) for k, v in re.findall(r"#define EXPS_OFF_(\w+) (\d+)ull", abi)}
    assert kinds == {"CM1": 1, "CONST": 4, "ZI": 5, "SCRATCH": 6, "TRACE": 7, "WORD": 8}
    assert (render_model.OFF_CM, render_model.OFF_CONST, render_model.OFF_ZI, render_model.OFF_SCRATCH,
            render_model.OFF_TRACE, render_model.OFF_WORD) == ({1: 1, 2: 2, 3: 3}, 4, 5, 6, 7, 8)
    col, cst = Leaf("cm", 1, stage=2, col=7, shift=-2), Leaf("const", 1, col=3)
    at = render_model.Offsets()
    lines = [emit._op_line(0, Op("add", "11", col, cst, 1), {}, at=at), f"{emit._scratch_c(5, 0, at)} = v0;",
             emit._op_line(1, Op("mul", "11", Leaf("zi", 1), Leaf("cm", 1, stage=3, col=9), 1), {}, at=at),
             f"const uint64_t v2 = {emit._scratch_c(5, 0, at)};",
             emit._op_line(3, Op("sub_swap", "11", col, Leaf("cm", 1, stage=1, col=2, shift=1), 1), {}, at=at)]
    assert at.descs() == [2 << 32 | 7, 4 << 32 | 3, 6 << 32 | 5, 3 << 32 | 9, 5 << 32 | 0, 1 << 32 | 2]
    assert emit.declarations(at) + lines == [
        "const char* const exps_rb_m2 = X.aux + ((uint64_t)EXPS_ROW(-2) << 3);",
        "const char* const exps_cb = (const char*)X.cst + ((uint64_t)row << 3);",
        "char* const exps_sb = (char*)scratch + (lo << 3);",
        "const char* const exps_rb = X.aux + ((uint64_t)row << 3);",
        "const char* const exps_rb_p1 = X.aux + ((uint64_t)EXPS_ROW(1) << 3);",
        "const uint64_t v0 = gl_add(EXPS_LD((const uint64_t*)(exps_rb_m2 + O.v[0])), "
        "EXPS_LD((const uint64_t*)(exps_cb + O.v[1])));",
        "(*(uint64_t*)(exps_sb + O.v[2])) = v0;",
        "const uint64_t v1 = gl_mul(EXPS_LD((const uint64_t*)(exps_rb + O.v[4])), "
        "EXPS_LD((const uint64_t*)(exps_rb + O.v[3])));",
        "const uint64_t v2 = (*(uint64_t*)(exps_sb + O.v[2]));",
        "const uint64_t v3 = gl_sub(EXPS_LD((const uint64_t*)(exps_rb_p1 + O.v[5])), "
        "EXPS_LD((const uint64_t*)(exps_rb_m2 + O.v[0])));"]
    t1, t2 = Leaf("cm", 1, stage=1, col=4, shift=1), Leaf("cm", 1, stage=2, col=4)
    ir = KernelIR(0, False, (Op("add", "11", t1, t2, 1), Op("mul", "11", cst, t1, 1), Op("mul", "11", Val(1, 1), Leaf("zi", 1), 1)))
    at = render_model.Offsets(trace=True)
    body = emit.expr_body(ir, at)
    assert at.descs() == [7 << 32 | 4, 2 << 32 | 4, 4 << 32 | 3]
    assert emit.declarations(at) + body == [
        "const char* const exps_tb_p1 = (const char*)X.cm[1] + ((uint64_t)EXPS_ROW(1) << 3);",
        "const char* const exps_rb = X.aux + ((uint64_t)row << 3);",
        "const char* const exps_cb = (const char*)X.cst + ((uint64_t)row << 3);",
        "const uint64_t v0 = gl_add(EXPS_LD((const uint64_t*)(exps_tb_p1 + O.v[0])), "
        "EXPS_LD((const uint64_t*)(exps_rb + O.v[1])));",
        "(void)v0;",
        "const uint64_t v1 = gl_mul(EXPS_LD((const uint64_t*)(exps_cb + O.v[2])), "
        "EXPS_LD((const uint64_t*)(exps_tb_p1 + O.v[0])));",
        "const uint64_t v2 = gl_mul(v1, EXPS_LD(X.zi + row));"]
    # past the table: as rendered with no entries, and no base for them
    many = KernelIR(0, True, tuple(Op("copy", "1", Leaf("cm", 1, stage=1, col=i, shift=i % 2), None, 1)
                                   for i in range(render_model.OFFS_MAX + 2)))
    at = render_model.Offsets()
    out = emit.expr_body(many, at)
    assert len(at.descs()) == render_model.OFFS_MAX and at.descs()[-1] == 1 << 32 | (render_model.OFFS_MAX - 1)
    assert out[-4:] == emit.expr_body(many)[-4:] and "O.v" not in out[-2]
    assert out[-5] == f"const uint64_t v{render_model.OFFS_MAX - 1} = EXPS_LD((const uint64_t*)(exps_rb_p1 + " \
        f"O.v[{render_model.OFFS_MAX - 1}]));"
    assert emit.declarations(at) == ["const char* const exps_rb = X.aux + ((uint64_t)row << 3);",
                                     "const char* const exps_rb_p1 = X.aux + ((uint64_t)EXPS_ROW(1) << 3);"]
    with pytest.raises(TypeError, match="refusing to format non-integer"):
        render_model.Offsets().column(Leaf("cm", 1, stage="1", col=0), 0)


_ADDRESSED = re.compile(r"\(const uint64_t\*\)\((exps_[rct]b)(?:_([mp])(\d+))? \+ O\.v\[(\d+)\]\)")
_SLOT = re.compile(r"\(\*\(uint64_t\*\)\(exps_sb \+ O\.v\[(\d+)\]\)\)")


def _unaddressed(lines: list[str], descs: list[int]) -> list[str]:
    """A kernel's lines with each exps_offs load and store put back as the address its descriptor
    and base stand for (what the launcher's offsets add up to) and each literal word as the literal,
    the base declarations dropped."""
    def load(m: re.Match) -> str:
        kind, index = descs[int(m[4])] >> 32, descs[int(m[4])] & 0xFFFFFFFF
        shift = 0 if m[2] is None else int(m[3]) * (-1 if m[2] == "m" else 1)
        row = "row" if shift == 0 else f"EXPS_ROW({shift})"
        if kind == render_model.OFF_ZI:
            assert (m[1], shift) == ("exps_rb", 0)
            return "X.zi + row"
        assert kind in {"exps_rb": (1, 2, 3), "exps_cb": (4,), "exps_tb": (7,)}[m[1]]
        src = "X.cst" if kind == 4 else f"X.cm[{1 if kind == 7 else kind}]"
        return f"{src} + ((uint64_t){index} << X.lg) + {row}"

    def slot(m: re.Match) -> str:
        assert descs[int(m[1])] >> 32 == render_model.OFF_SCRATCH
        return f"scratch[{descs[int(m[1])] & 0xFFFFFFFF} * wave + lo]"

    def word(m: re.Match) -> str:
        assert descs[int(m[1])] >> 32 == render_model.OFF_WORD
        return f"{descs[int(m[1])] & 0xFFFFFFFF}ull"
    body = [ln for ln in lines if not ln.startswith(("const char* const exps_", "char* const exps_sb"))]
    return [re.sub(r"O\.v\[(\d+)\]", word, _SLOT.sub(slot, _ADDRESSED.sub(load, ln))) for ln in body]


def _check_addressed(ks: KernelSource) -> int:
    """The property below for one kernel; how many addressed loads and stores it has."""
    seen = 0
    for c in range(ks.plan.n_chunks):
        d = q_part(ks, c)
        assert _unaddressed(d["lines"], d["offs"]) == chunk_body(ks.q, ks.plan, c, value=emit.uses_value_path(ks.q))
        assert len(d["offs"]) == len(set(d["offs"])) <= render_model.OFFS_MAX
        seen += sum(len(_ADDRESSED.findall(ln)) + len(_SLOT.findall(ln)) for ln in d["lines"])
    for x, d in zip(ks.exprs, x_parts(ks)):
        assert _unaddressed(d["lines"], d["offs"]) == emit.expr_body(x.ir)
        seen += sum(len(_ADDRESSED.findall(ln)) for ln in d["lines"])
    return seen


@pytest.mark.parametrize("name,opc,n", [("Large", 64, 5061), ("Large", 0, 2694), ("Medium", 0, 430), ("Tiny", 0, 37)])
def test_every_addressed_load_is_the_load_its_entry_stands_for(name: str, opc: int, n: int) -> None:
    """Every Q chunk and every expression of a sample AIR: its lines with each `O.v[i]` load or
    store put back as the address its descriptor names (a literal word as the literal) are its
    lines as rendered with no exps_offs: the same words read and written (n of them at an entry)."""
    assert _check_addressed(_ks(name, opc)) == n


def test_every_addressed_load_and_literal_word_of_the_pk_keys_is_its_entrys() -> None:
    """The same on ../shared/pk's keys whose expressions read literal words (ConnectionNew chunked,
    SpecifiedRanges, Lookup0)."""
    require("pk")
    for key, base, opc, n, words in [("connection", "ConnectionNew", 32, 687, 80),
                                     ("range_check", "SpecifiedRanges", 0, 202, 40), ("lookup", "Lookup0", 0, 62, 8)]:
        [p] = [p for p in discover(ROOT.parent / "shared" / "pk" / key / "provingKey") if p.base == base]
        si, ei = load_air(p.starkinfo, p.expressions)
        cov = cover(si, ei)
        ks = KernelSource(p.key, cov.q, plan(cov.q, opc), cov.exprs, HASH)
        assert sum(o >> 32 == render_model.OFF_WORD for d in x_parts(ks) for o in d["offs"]) == words, base
        assert _check_addressed(ks) == n, base


def test_expressions_of_one_shape_share_one_kernel() -> None:
    """Expressions whose kernels would differ only in the columns they read (their offsets)
    are one kernel, rendered once, in the TU of the first of the shape and named after it; every
    expression keeps its own launch-table entry and offsets. ../shared/pk's Intermediates: 56
    expressions, 16 kernels."""
    require("pk")
    pk = ROOT.parent / "shared" / "pk" / "intermediate_sums" / "provingKey"
    [p] = [p for p in discover(pk) if p.base == "Intermediates"]
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    ks = KernelSource(p.key, cov.q, plan(cov.q, 64), cov.exprs, "0" * 64)
    xs = x_parts(ks)
    own = [i for i, d in enumerate(xs) if d["of"] == i]
    assert (len(xs), len(own)) == (56, 16)
    for i, d in enumerate(xs):
        f = xs[d["of"]]
        assert d["of"] <= i and d["kname"] == f["kname"] and f["kname"].endswith(f"_x_e{f['exp_id']}")
        assert (d["lines"], d["result"], d["vdim"], d["num1"], d["inv"]) == \
            (f["lines"], f["result"], f["vdim"], f["num1"], f["inv"])
    assert len({d["kname"] for d in xs}) == 16
    assert any(d["offs"] != xs[d["of"]]["offs"] for d in xs)       # shared kernels, other columns
    files = render(ks)
    text = "".join(t for n, t in files.items() if n.endswith(".cu"))
    for d in xs:
        assert text.count(f"EXPS_HD gl3 {d['kname']}(") == 1
    t = emit.launch_table(ks)
    assert [x["exp_id"] for x in t["exprs"]] == sorted((d["exp_id"] for d in xs), key=int)
    by_id = {d["exp_id"]: d for d in xs}
    for x in t["exprs"]:
        d = by_id[x["exp_id"]]
        assert x["sym"] == kernel_symbol(f"{d['kname']}_k", X_PARAMS)
        assert x["offs"] == ", ".join(f"{o}ull" for o in d["offs"])
        assert t["tus"][x["lib"]] in [n for n in files if f"EXPS_HD gl3 {d['kname']}(" in files[n]]
    kernels = tu_kernels(ks)
    assert sum(len([k for k in ns if "_x_e" in k]) for ns in kernels.values()) == \
        16 + sum(1 for i in own if xs[i]["inv"])


def _lit_expr(a: int, b: int, col: int, exp_id: int = 0) -> KernelIR:
    """v2 = (cm1[col] * a) + (1 - b): a trace-domain expression with three literals."""
    n = lambda v: Leaf("number", 1, value=v)
    return KernelIR(exp_id, False, (Op("mul", "11", Leaf("cm", 1, stage=1, col=col), n(a), 1),
                                    Op("sub", "11", n(1), n(b), 1), Op("add", "11", Val(0, 1), Val(1, 1), 1)))


def test_literal_words_make_expressions_of_one_shape_but_their_literals_one_kernel() -> None:
    """render_model.literal_words: the literals that differ in a group of expressions otherwise
    alike (their IR with literals below 2^32 masked, their loads at the same entries) become
    exps_offs entries of kind EXPS_OFF_WORD after the columns' (index = the value), told apart by
    their place in IR order; a literal they share stays; an expression alone in its shape (here: of
    other store flags, or with a literal >= 2^32 that no other has there) keeps its text."""
    irs = [_lit_expr(6, 2, 3), _lit_expr(7, 2, 5), _lit_expr(9, 2, 1), _lit_expr(6, 2, 3), _lit_expr(1 << 32, 2, 3)]
    flags = [(0, True)] * 3 + [(0, False), (0, True)]
    ats = [render_model.Offsets(trace=True) for _ in irs]
    bodies = [emit.expr_body(ir, at) for ir, at in zip(irs, ats)]
    words = render_model.literal_words(irs, ats, flags)
    assert words == [{(0, 1): 1}] * 3 + [{}, {}]
    assert [at.descs() for at in ats] == [[7 << 32 | 3, 8 << 32 | 6], [7 << 32 | 5, 8 << 32 | 7],
                                          [7 << 32 | 1, 8 << 32 | 9], [7 << 32 | 3], [7 << 32 | 3]]
    shared = ["const uint64_t v0 = gl_mul(EXPS_LD((const uint64_t*)(exps_tb + O.v[0])), O.v[1]);",
              "const uint64_t v1 = gl_sub(1ull, 2ull);", "const uint64_t v2 = gl_add(v0, v1);"]
    assert [emit.expr_body(ir, at, w) for ir, at, w in zip(irs[:3], ats, words)] == [shared] * 3
    assert bodies[4][0] == "const uint64_t v0 = gl_mul(EXPS_LD((const uint64_t*)(exps_tb + O.v[0])), 4294967296ull);"
    # through x_parts: one kernel for the three, one for each of the two others
    ks = KernelSource("k", None, None, [ExprKernel(KernelIR(i, False, ir.ops), False, f[1])
                                        for i, (ir, f) in enumerate(zip(irs, flags))])
    xs = x_parts(ks)
    assert [d["of"] for d in xs] == [0, 0, 0, 3, 4]
    assert [d["lines"][1:] for d in xs[:3]] == [shared] * 3
    assert [d["offs"] for d in xs] == [at.descs() for at in ats]
    with pytest.raises(ValueError, match="after the literal words"):
        ats[0].column(Leaf("cm", 1, stage=2, col=0), 0)


def test_expressions_that_differ_in_their_literals_share_one_kernel() -> None:
    """../shared/pk's range checks and connections: expressions that differ only in their ranges or
    bus ids are one kernel per shape (SpecifiedRanges 21 expressions, 3 kernels; ConnectionNew 55,
    12), each launch-table entry with its own literal words."""
    require("pk")
    for key, base, n, own in [("range_check", "SpecifiedRanges", 21, 3), ("connection", "ConnectionNew", 55, 12)]:
        [p] = [p for p in discover(ROOT.parent / "shared" / "pk" / key / "provingKey") if p.base == base]
        si, ei = load_air(p.starkinfo, p.expressions)
        cov = cover(si, ei)
        ks = KernelSource(p.key, cov.q, plan(cov.q, 64), cov.exprs, "0" * 64)
        xs = x_parts(ks)
        assert (len(xs), len({d["kname"] for d in xs})) == (n, own), base
        for d in xs:
            f = xs[d["of"]]
            words = [o & 0xFFFFFFFF for o in d["offs"] if o >> 32 == render_model.OFF_WORD]
            assert len(words) == len([o for o in f["offs"] if o >> 32 == render_model.OFF_WORD])
            assert all(o >> 32 != render_model.OFF_WORD for o in d["offs"][:len(d["offs"]) - len(words)])
        t = emit.launch_table(ks)
        by_id = {d["exp_id"]: d for d in xs}
        assert all(x["offs"] == ", ".join(f"{o}ull" for o in by_id[x["exp_id"]]["offs"]) for x in t["exprs"])


_LIT_VALUES = st.sampled_from([0, 1, 2, 3, 7, 255, 65535, (1 << 32) - 1, 1 << 32, P - 1, (1 << 64) - 1])


@settings(max_examples=50, deadline=None)
@given(shapes=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       members=st.lists(st.tuples(st.integers(0, 3), st.lists(_LIT_VALUES, min_size=4, max_size=4),
                                  st.integers(0, 3)), min_size=1, max_size=8))
def test_literal_words_keep_every_expressions_words(shapes: list[int], members) -> None:
    """Property of render_model.literal_words: for every expression, its lines with each `O.v[i]`
    of a literal entry put back as that entry's value are its lines as rendered with none (nothing
    else changes, its column entry stays first and as it was); two expressions alike but for
    their columns and literals below 2^32 end with the same lines; a literal >= 2^32 is never an
    entry."""
    def ir(shape: int, lits: list[int], col: int) -> KernelIR:
        ops = [Op("copy", "1", Leaf("cm", 1, stage=1, col=col), None, 1)]
        for v in lits[:shape]:
            ops.append(Op("add", "11", Val(len(ops) - 1, 1), Leaf("number", 1, value=v), 1))
        return KernelIR(0, False, tuple(ops))
    irs = [ir(shapes[s % len(shapes)], lits, col) for s, lits, col in members]
    ats = [render_model.Offsets(trace=True) for _ in irs]
    plain = [emit.expr_body(x, at) for x, at in zip(irs, ats)]
    words = render_model.literal_words(irs, ats, [(0, True)] * len(irs))
    lines = [emit.expr_body(x, at, w) for x, at, w in zip(irs, ats, words)]
    for x, at, w, ls, pl in zip(irs, ats, words, lines, plain):
        d = at.descs()
        assert d[0] == 7 << 32 | x.ops[0].a.col and all(o >> 32 == render_model.OFF_WORD for o in d[1:])
        assert sorted(w.values()) == list(range(1, len(d)))
        assert all(x.ops[i].args()[j].value == d[k] & 0xFFFFFFFF < 1 << 32 for (i, j), k in w.items())
        back = [re.sub(r"O\.v\[(\d+)\]", lambda m: f"{d[int(m[1])] & 0xFFFFFFFF}ull" if int(m[1]) >= 1 else m[0], ln)
                for ln in ls]
        assert back == pl
    masked = lambda x: [(op.arith, op.b.value if op.b is not None and op.b.value >= 1 << 32 else None) for op in x.ops]
    for x, ls in zip(irs, lines):
        for y, ms in zip(irs, lines):
            if masked(x) == masked(y):
                assert ls == ms
