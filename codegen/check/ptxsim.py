"""A simulator of the PTX subset of the device field ops in templates/gen_common.cuh.

The device forms of gl_add, gl_sub and gl_mul are inline PTX with carry chains (behind
``__CUDA_ARCH__``); the host check compiles the portable C forms instead, so without a GPU nothing
would run the device text. This module runs it: it extracts each function's ``asm(...)`` string from the
header and interprets it on Python ints, per the PTX ISA semantics of the instructions it uses,
with one hardware detail made explicit: there is a single carry flag, which ``add.cc``-type
instructions set to the carry and ``sub.cc``-type instructions set to the NOT of the borrow (the
hardware computes ``a - b`` as ``a + ~b + 1``); ``addc``/``madc`` add the flag, ``subc`` subtracts its
complement. PTX defines a flag only for readers of the same kind as its writer, so a reader of
the other kind is an error here (``PtxError``), not a silently inverted bit: that is the rule the
header's forms follow (a ``gl_add`` that breaks it can give 0xFFFFFFFF for 0 + 0).

Only what the header uses is supported; anything else raises ``PtxError`` naming the instruction.
Never used by a build (tests/test_ptx_forms.py compares it with codegen.check.gl64 on every edge
pair; bench/fieldops.py checks the compiled forms on a GPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1


class PtxError(ValueError):
    """An instruction or operand this simulator does not support, or a carry read across kinds."""


@dataclass
class Asm:
    """One asm statement: its PTX text and the C operand list it binds to %0, %1, ..."""

    func: str
    text: str
    outputs: list[str]
    inputs: list[str]


def _c_string(body: str) -> str:
    """Concatenate the adjacent C string literals of an asm(...) argument, with \\n and \\t."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', body)
    s = "".join(parts)
    return s.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')


def extract(header: str | Path, func: str) -> Asm:
    """The asm statement of device function `func` in `header` (the first one in its body)."""
    text = Path(header).read_text() if isinstance(header, Path) else header
    # the definition (a forward declaration ends in ';' before any '{')
    m = next((m for m in re.finditer(r"__device__ __forceinline__ \w+ " + re.escape(func) + r"\(", text)
              if text.find("{", m.end()) < text.find(";", m.end())), None)
    if not m:
        raise PtxError(f"no device function {func} in the header")
    a = text.index("asm(", m.end())
    # the asm(...) call: balance parentheses outside string literals
    depth, i, in_str = 0, a + 3, False
    while True:
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    call = text[a + 4:i]
    sections = _split_colons(call)
    if len(sections) < 2:
        raise PtxError(f"{func}: asm without operands")
    ptx = _c_string(sections[0])
    outs = _operands(sections[1])
    ins = _operands(sections[2]) if len(sections) > 2 else []
    return Asm(func, ptx, outs, ins)


def _split_colons(call: str) -> list[str]:
    out, cur, in_str, i = [], [], False, 0
    while i < len(call):
        ch = call[i]
        if in_str:
            cur.append(ch)
            if ch == "\\":
                cur.append(call[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur.append(ch)
        elif ch == ":":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def _operands(section: str) -> list[str]:
    """'"=l"(r)' , '"l"(a), "r"(K1)' -> C expressions in order."""
    return [m.group(1).strip() for m in re.finditer(r'"[=+]?&?[a-z]"\s*\(([^()]*(?:\([^()]*\))?[^()]*)\)', section)]


@dataclass
class _State:
    regs: dict[str, tuple[int, int]] = field(default_factory=dict)   # name -> (bits, value)
    cf: int | None = None            # hardware carry flag
    cf_kind: str | None = None       # "add" or "sub": who set it


_DECL = re.compile(r"^\.reg\s+\.(u32|u64|b32|b64|s32|s64)\s+(.+)$")


def run(asm: Asm, values: dict[str, int]) -> int:
    """Run `asm` with its inputs bound by C expression name (e.g. {"a": .., "b": .., "K1": 1});
    returns the value of output %0."""
    return run_all(asm, values)[0]


def run_all(asm: Asm, values: dict[str, int]) -> list[int]:
    """`run`, returning every output (%0, %1, ...) in order (e.g. gl_acc_mul's lo and hi)."""
    st = _State()
    for k, expr in enumerate(asm.inputs, start=len(asm.outputs)):
        if expr not in values:
            raise PtxError(f"{asm.func}: no value for input %{k} ({expr})")
        st.regs[f"%{k}"] = (64, values[expr] & M64)
    for k in range(len(asm.outputs)):
        st.regs[f"%{k}"] = (64, 0)
    for raw in re.split(r"[;\n]", asm.text):
        line = raw.split("//")[0].strip()
        if not line or line in ("{", "}"):
            continue
        d = _DECL.match(line)
        if d:
            w = 64 if d.group(1).endswith("64") else 32
            for name in d.group(2).split(","):
                st.regs[name.strip()] = (w, 0)
            continue
        _exec(asm.func, line, st)
    return [st.regs[f"%{k}"][1] for k in range(len(asm.outputs))]


def _val(st: _State, tok: str, func: str, line: str) -> int:
    tok = tok.strip()
    if tok in st.regs:
        return st.regs[tok][1]
    if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", tok):
        v = int(tok, 0)
        return v & M64
    raise PtxError(f"{func}: unknown operand {tok!r} in {line!r}")


def _set(st: _State, name: str, v: int, func: str, line: str) -> None:
    if name not in st.regs:
        raise PtxError(f"{func}: undeclared register {name!r} in {line!r}")
    w = st.regs[name][0]
    st.regs[name] = (w, v & (M32 if w == 32 else M64))


def _read_cf(st: _State, kind: str, func: str, line: str) -> int:
    if st.cf is None:
        raise PtxError(f"{func}: {line!r} reads the carry flag before any instruction set it")
    if st.cf_kind != kind:
        raise PtxError(f"{func}: {line!r} reads a carry flag set by a {st.cf_kind}-type instruction")
    return st.cf


def _exec(func: str, line: str, st: _State) -> None:
    op, _, rest = line.partition(" ")
    args = [a.strip() for a in _split_args(rest)]
    if op in ("mov.b64", "mov.b32") and not args[0].startswith("{") and not args[1].startswith("{"):
        dst, src = args                              # copy: mov.b64 x, y
        _set(st, dst, _val(st, src, func, line) & (M64 if op == "mov.b64" else M32), func, line)
        return
    if op == "mov.b64":
        dst, src = args
        if dst.startswith("{"):                      # unpack: mov.b64 {lo, hi}, x
            lo, hi = [x.strip() for x in dst.strip("{}").split(",")]
            v = _val(st, src, func, line)
            _set(st, lo, v & M32, func, line)
            _set(st, hi, v >> 32, func, line)
        else:                                        # pack: mov.b64 x, {lo, hi}
            lo, hi = [x.strip() for x in src.strip("{}").split(",")]
            _set(st, dst, (_val(st, lo, func, line) & M32) | ((_val(st, hi, func, line) & M32) << 32), func, line)
        return
    m = re.fullmatch(r"(add|addc|sub|subc|mul|mad|madc|shr)(\.(lo|hi|wide))?(\.cc)?\.(u32|s32|u64)", op)
    if not m:
        raise PtxError(f"{func}: unsupported instruction {op!r} in {line!r}")
    base, part, cc, ty = m.group(1), m.group(3), bool(m.group(4)), m.group(5)
    w = 64 if ty == "u64" else 32
    mask = M64 if w == 64 else M32
    dst, srcs = args[0], [_val(st, a, func, line) for a in args[1:]]
    if base in ("add", "addc"):
        a, b = srcs[0] & mask, srcs[1] & mask
        cin = _read_cf(st, "add", func, line) if base == "addc" else 0
        s = a + b + cin
        res = s & mask
        if cc:
            st.cf, st.cf_kind = s >> w, "add"
    elif base in ("sub", "subc"):
        a, b = srcs[0] & mask, srcs[1] & mask
        bin_ = 1 - _read_cf(st, "sub", func, line) if base == "subc" else 0
        d = a - b - bin_
        res = d & mask
        if cc:
            st.cf, st.cf_kind = (0 if d < 0 else 1), "sub"   # hardware: NOT borrow
    elif base in ("mul", "mad", "madc"):
        if ty == "u64":
            raise PtxError(f"{func}: unsupported instruction {op!r} in {line!r}")
        a, b = srcs[0] & M32, srcs[1] & M32
        if ty == "s32":
            a = a - (1 << 32) if a >> 31 else a
            b = b - (1 << 32) if b >> 31 else b
        prod = a * b
        if part == "wide":
            full = prod & M64
            add = srcs[2] & M64 if base != "mul" else 0
            s = full + add
            if base == "madc":
                s += _read_cf(st, "add", func, line)
            res = s & M64
            if cc:
                raise PtxError(f"{func}: unsupported instruction {op!r} in {line!r}")
            _set(st, dst, res, func, line)
            return
        if part not in ("lo", "hi"):
            raise PtxError(f"{func}: unsupported instruction {op!r} in {line!r}")
        p = (prod & M64) if part == "lo" else ((prod & ((1 << 64) - 1)) >> 32)
        if ty == "s32" and part == "hi":
            p = (prod >> 32) & M32
        p &= M32
        add = srcs[2] & M32 if base != "mul" else 0
        cin = _read_cf(st, "add", func, line) if base == "madc" else 0
        s = p + add + cin
        res = s & M32
        if cc:
            st.cf, st.cf_kind = s >> 32, "add"
    elif base == "shr":
        a, n = srcs[0] & M32, srcs[1]
        if ty == "s32":
            a = a - (1 << 32) if a >> 31 else a
        res = (a >> n) & M32
    else:  # pragma: no cover - the regex admits nothing else
        raise PtxError(f"{func}: unsupported instruction {op!r} in {line!r}")
    _set(st, dst, res, func, line)


def _split_args(rest: str) -> list[str]:
    out, cur, depth = [], [], 0
    for ch in rest:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out
