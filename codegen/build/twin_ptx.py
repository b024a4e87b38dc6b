"""A bounded twin from the first compile's PTX: ptxas only, no second cicc (issue #15).

`bounds` compiles a device TU's chunk kernels a second time as `<name>_kb` with
`__launch_bounds__(256, b)`. From the source that is a whole nvcc run (preprocessing, cicc, ptxas,
fatbinary) of which cicc is about a third. cicc's PTX of the bounded kernel differs from the
unbounded one's only by the entry's name and one directive (`.minnctapersm b` beside the
`.maxntid 256, 1, 1` that `__launch_bounds__(256)` gives every chunk kernel), up to the numbering
of virtual registers and labels, and ptxas makes the same SASS from either: the sample's Large, the
twins of all three TUs, every instruction and encoding the same (tests/test_twin_ptx.py checks it
on every build of the sample's Medium). So `edit` writes the twin's PTX from the first compile's:
the candidate entries renamed and given the directive, every other entry left out (ptxas drops
the device functions only they called, as the source twin's `#if` does). nvcc compiles that `.ptx`
as it compiles a `.cu` (`-c -fatbin`, the same -gencode: SASS plus this PTX for the JIT).

Only for a build of one arch: nvcc keeps one PTX per virtual arch, and a twin's fatbin is one
compile. Anything unexpected in the text (an entry missing or twice, no `.maxntid 256, 1, 1`, a
bound already there) raises `TwinPtxError`, and the caller compiles the twin from source as before.
"""
from __future__ import annotations

import re

#: an entry's first line as cicc writes it: `.visible .entry <name>(`
_ENTRY = re.compile(r"^(?:\.visible |\.weak )?\.entry (\S+)\($")
_GLOBL = "\t// .globl\t"
_BLOCK_DIRECTIVE = ".maxntid 256, 1, 1"
_BOUND_DIRECTIVES = (".minnctapersm", ".maxnreg", ".reqntid")


class TwinPtxError(ValueError):
    """The first compile's PTX is not what `edit` expects: the twin is compiled from source."""


def _rename(block: str, old: str, new: str) -> str:
    """Every whole-symbol use of `old` in `block` (the entry's name, its `_param_<i>` names)."""
    return re.sub(rf"(?<![\w$.]){re.escape(old)}(?=_param_\d|[^\w$]|$)", new, block)


def edit(ptx: str, twins: dict[str, tuple[str, int]]) -> str:
    """The twin's PTX: of `ptx`'s entries only those named in `twins` ({entry: (twin entry name,
    min blocks per SM)}), each renamed and given `.minnctapersm <b>` after its `.maxntid 256, 1,
    1`; everything outside entries (the header, device functions, globals) as it was."""
    if not twins:
        raise TwinPtxError("no twin entries asked for")
    lines = ptx.split("\n")
    out: list[str] = []
    found: set[str] = set()
    i = 0
    while i < len(lines):
        m = _ENTRY.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        try:
            end = lines.index("}", i)
        except ValueError:
            raise TwinPtxError(f"entry {m[1]} has no closing brace") from None
        name, block = m[1], lines[i:end + 1]
        i = end + 1
        if name not in twins:
            while out and (out[-1] == "" or out[-1].startswith(_GLOBL)):
                out.pop()       # its `// .globl` comment
            out.append("")
            continue
        if name in found:
            raise TwinPtxError(f"entry {name} appears twice")
        found.add(name)
        new, b = twins[name]
        if not (isinstance(b, int) and 1 <= b <= 32) or not re.fullmatch(r"[\w$]+", new):
            raise TwinPtxError(f"twin of {name}: bad name {new!r} or bound {b!r}")
        head = block[:block.index("{")] if "{" in block else []
        if head.count(_BLOCK_DIRECTIVE) != 1:
            raise TwinPtxError(f"entry {name}: not exactly one '{_BLOCK_DIRECTIVE}'")
        if any(ln.startswith(_BOUND_DIRECTIVES) for ln in head):
            raise TwinPtxError(f"entry {name} is bounded already")
        at = block.index(_BLOCK_DIRECTIVE)
        block = block[:at + 1] + [f".minnctapersm {b}"] + block[at + 1:]
        j = len(out) - 1
        while j >= 0 and out[j] == "":
            j -= 1
        if j >= 0 and out[j] == f"{_GLOBL}{name}":      # its `// .globl` comment
            out[j] = f"{_GLOBL}{new}"
        out.append(_rename("\n".join(block), name, new))
    missing = sorted(set(twins) - found)
    if missing:
        raise TwinPtxError(f"entries {missing[:3]} not in the PTX")
    return "\n".join(out)
