"""What a kernel's text needs, decided on the IR before any text is rendered.

emit.py maps IR to C text; the decisions that text depends on are made here, as plain data the
renderer reads, never recovered from rendered text:
- `Offsets`: where a kernel reads its columns and scratch slots (its exps_offs entries, the row
  bases the addressed loads need; docs/DESIGN-column-offsets.md);
- `chunk_forms`: what a Q chunk runs on the value path (`value_op`, `distributed`, `acc_values`;
  docs/DESIGN-value-path.md);
- `literal_words`: which number literals of the trace-domain expressions are read from exps_offs,
  so that expressions alike but for them share one kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

from codegen.ir import KernelIR, Leaf, Op, Val
from codegen.plan import Plan


def check_int(x) -> int:
    """`x` if it is an integer (never a bool, a string, a float...): the only values formatted into C."""
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"refusing to format non-integer {x!r} into C")
    return x


# ============================================================================ exps_offs addressing

#: entries of a kernel's exps_offs (templates/exps_abi.h EXPS_MAX_OFFS): its first OFFS_MAX
#: distinct column words and scratch slots; any more keep the address arithmetic of their own
OFFS_MAX = 128
#: exps_abi.h EXPS_OFF_*: the kind of an entry (its descriptor is `kind << 32 | index`)
OFF_CM = {1: 1, 2: 2, 3: 3}         # a column of the aux trace's stage 1-3 section
OFF_CONST = 4                       # a column of the const tree
OFF_ZI = 5                          # the zerofier
OFF_SCRATCH = 6                     # a scratch slot
OFF_TRACE = 7                       # a trace-domain expression's stage-1 column: the trace's (spec §2.4)
OFF_WORD = 8                        # a literal word of the expression (index: its value)


@dataclass(frozen=True)
class Base:
    """A row base a kernel declares once per thread: `section` ("aux": the aux trace, "cst": the
    const tree, "trace": the trace, at the row shifted by `shift`; "scratch": the wave's scratch)."""

    section: str
    shift: int = 0


class Offsets:
    """A kernel's exps_offs: its entries `(kind, index) -> slot` in the order the kernel's lines
    first use them, and the row bases its addressed loads and stores need, in the same order
    (`bases`); the literal words (`add_words`) follow the other entries. An entry is made for
    the first `limit` distinct (kind, index) of the kernel: past them, and for an index that is not
    an unsigned 32-bit value, a load or store keeps its own arithmetic (its methods answer None).
    With `trace` (a trace-domain expression) a stage-1 column is the trace's (kind OFF_TRACE), and
    the zerofier (extended only) keeps its own arithmetic.

    Within one line of a kernel its columns take their entries before its zerofier (emit asks for
    a line's columns first: `emit._args_c`); scratch slots are read and written by lines of their
    own. The order is the text's only: any order gives the same words."""

    def __init__(self, trace: bool = False, limit: int = OFFS_MAX) -> None:
        self.trace = trace
        self.limit = limit
        self.entries: dict[tuple[int, int], int] = {}
        self.bases: dict[Base, None] = {}       # (an ordered set)
        self.words: list[int] = []

    def _use(self, kind: int, index: int, base: Base) -> tuple[int, Base] | None:
        k = (kind, index)
        if k not in self.entries:
            if self.words:
                raise ValueError("exps_offs entries after the literal words")
            if len(self.entries) >= self.limit or not 0 <= index < 1 << 32:
                return None
            self.entries[k] = len(self.entries)
        self.bases.setdefault(base)
        return self.entries[k], base

    def _where(self, lf: Leaf, d: int) -> tuple[int, int, Base] | None:
        """(kind, index, base) of component `d` of the column load `lf` (cm or const), or None for
        a load that is not one of a section (its own arithmetic)."""
        shift, col = check_int(lf.shift), check_int(lf.col) + d
        if lf.kind == "const":
            return OFF_CONST, col, Base("cst", shift)
        stage = check_int(lf.stage)
        if lf.kind != "cm" or stage not in OFF_CM:
            return None
        if self.trace and stage == 1:
            return OFF_TRACE, col, Base("trace", shift)
        return OFF_CM[stage], col, Base("aux", shift)

    def column(self, lf: Leaf, d: int) -> tuple[int, Base] | None:
        """(slot, base) of component `d` of the column load `lf` (cm or const), or None."""
        w = self._where(lf, d)
        return None if w is None else self._use(*w)

    def zerofier(self) -> tuple[int, Base] | None:
        """(slot, base) of the zerofier at the row, or None (a trace-domain expression: always)."""
        return None if self.trace else self._use(OFF_ZI, 0, Base("aux"))

    def scratch(self, slot: int) -> int | None:
        """The entry of scratch slot `slot` (its base: Base("scratch")), or None."""
        got = self._use(OFF_SCRATCH, check_int(slot), Base("scratch"))
        return None if got is None else got[0]

    def add_words(self, values: list[int]) -> list[int]:
        """Entries for the literal words `values` (each one its own, after every other entry):
        their slots. No entry can be made after them."""
        n = len(self.entries) + len(self.words)
        if n + len(values) > OFFS_MAX:
            raise ValueError("more exps_offs entries than EXPS_MAX_OFFS")
        if not all(0 <= check_int(v) < 1 << 32 for v in values):
            raise ValueError("a literal word the launcher copies is below 2^32")
        self.words.extend(values)
        return list(range(n, n + len(values)))

    def descs(self) -> list[int]:
        """The entries' descriptors, in slot order (`kind << 32 | index`: the launch table's offs)."""
        return [kind << 32 | index for kind, index in self.entries] + [OFF_WORD << 32 | v for v in self.words]

    def key(self, lf: Leaf) -> tuple:
        """What a kernel's text makes of the leaf `lf` with the entries made so far (none is made
        here): per component its (slot, base), or the leaf where it keeps its own arithmetic (a
        number, a scalar, a load with no entry)."""
        if lf.kind in ("cm", "const"):
            got = []
            for d in range(lf.dim):
                w = self._where(lf, d)
                slot = None if w is None else self.entries.get(w[:2])
                got.append((lf, d) if slot is None else (slot, w[2]))
            return tuple(got)
        if lf.kind == "zi" and not self.trace and (OFF_ZI, 0) in self.entries:
            return ((self.entries[OFF_ZI, 0], Base("aux")),)
        return (lf,)


# ============================================================================ the value path

#: the Goldilocks prime (spec §1)
GL_P = (1 << 64) - (1 << 32) + 1
_ZERO = Leaf("number", 1, value=0)


def value_op(op: Op) -> Op:
    """The op a Q kernel's value path runs for `op`: the same field element with fewer products. A
    product by the number p - 1 is a negation (`0 - x`: an add-pipe sub instead of three wide
    products, and an accumulator for the add or sub that reads it), a product by 1 a copy. Only the
    value path: the production word of `x * (p - 1)` is gl_mul's, not gl_sub's, so the exact
    program (codegen/program.py) and the expression kernels keep the product (what the Qs of
    ../shared/pk multiply by p - 1: ConnectionNew 60 of its 750 base products, RangeCheckMix 25
    of 140, Connection1 9 of 134)."""
    if op.arith != "mul" or op.shape not in ("11", "31"):
        return op
    pairs = [(op.a, op.b), (op.b, op.a)] if op.shape == "11" else [(op.a, op.b)]
    for x, k in pairs:
        if isinstance(k, Leaf) and k.kind == "number" and k.value in (GL_P - 1, 1):
            if k.value == 1:
                return Op("copy", str(op.dim), x, None, op.dim)
            if op.shape == "31":
                return Op("sub_swap", "31", x, _ZERO, 3)
            return Op("sub", "11", _ZERO, x, 1)
    return op


#: a Q with this many 3x3 products takes the value path (docs/DESIGN-value-path.md): with inputs
#: like the prover's (uniform field elements: every extended-domain column is a low-degree
#: extension) the Qs of 1-5 products run 1.03x-1.09x on it and none slower (H200); on inputs of 0/1
#: and small integers on every column (Q small on many rows, the fallback on most warps) the same
#: Qs ran 0.78x-0.84x. A Q with no 3x3 product (expr_optimizations' 3-op Test: Q = 0 for a zero
#: witness) stays exact.
VALUE_MIN_MUL33 = 1


def uses_value_path(ir: KernelIR) -> bool:
    return sum(1 for op in ir.ops if (op.arith, op.shape) == ("mul", "33")) >= VALUE_MIN_MUL33


#: value-path ops whose result may stay accumulators (gl_acc for a base-field value, gl3_acc for a
#: dim-3 one: templates/gen_common.cuh) for the one add or sub that reads it, with the bound of
#: their |hi| (for an add or sub: its accumulator operands' bounds plus 1)
ACC_MUL_HI = {("mul", "33"): 9, ("mul", "31"): 1, ("mul", "11"): 1}
#: the adds and subs that take accumulators (shape 31: as their dim-3 operand) and give accumulators
ACC_USE = frozenset({("add", "33"), ("sub", "33"), ("sub_swap", "33"),
                     ("add", "31"), ("sub", "31"), ("sub_swap", "31"),
                     ("add", "11"), ("sub", "11"), ("sub_swap", "11")})
#: an accumulator tree stops growing (its value is reduced) before |hi| could pass this: gl_acc_red
#: needs |hi| < 2^30, and a root adds two operands of at most this bound plus 1
ACC_HI_BOUND = 1 << 20


def single_users(ir: KernelIR) -> dict[int, int]:
    """{value: the op that reads it} for the values read by exactly one operand of one op."""
    count: dict[int, int] = {}
    user: dict[int, int] = {}
    for j, op in enumerate(ir.ops):
        for a in op.args():
            if isinstance(a, Val):
                count[a.id] = count.get(a.id, 0) + 1
                user[a.id] = j
    return {v: user[v] for v, n in count.items() if n == 1}


def acc_values(ir: KernelIR, pl: Plan, c: int, users: dict[int, int] | None = None) -> dict[int, int]:
    """The values of chunk `c` that stay accumulators on the value path, {value: bound of |hi|}: a
    product or add/sub read once, by an add or sub of the same chunk (a dim-3 value as a dim-3
    operand, a base-field value by a base-field add or sub), neither the result nor stored for a
    later chunk. The add or sub that reads one works on the accumulators; the first that is not
    itself kept reduces them (docs/ARCHITECTURE.md "Value path")."""
    start, end = pl.chunks[c]
    users = single_users(ir) if users is None else users
    res = len(ir.ops) - 1
    stored = set(pl.stores[c])
    acc: dict[int, int] = {}
    for i in range(start, end):
        op = value_op(ir.ops[i])
        kind = (op.arith, op.shape)
        u = users.get(i)
        if i == res or i in stored or u is None or not i < u < end:
            continue
        uop = value_op(ir.ops[u])
        if (uop.arith, uop.shape) not in ACC_USE or (uop.shape == "31" and uop.a != Val(i, 3)) \
                or (op.dim == 1) != (uop.shape == "11"):
            continue
        if kind in ACC_MUL_HI:
            bound = ACC_MUL_HI[kind]
        elif kind in ACC_USE:
            bound = 1 + sum(acc.get(a.id, 0) for a in op.args() if isinstance(a, Val))
        else:
            continue
        if bound <= ACC_HI_BOUND:
            acc[i] = bound
    return acc


#: a challenge squared pays for itself in a chunk that distributes this many products by it (two:
#: 12 base products as 6 + 6, but a 3x1 product runs fewer instructions than a 3x3 one's share;
#: H200: Lookup3, Permutation2_6, SimpleRight 1.03x against 3); in the chunk's text the squares
#: are `const gl3 sq0`, sq1, ... (in the order of their first use)
DISTRIBUTE_MIN = 2


def distributed(ir: KernelIR, pl: Plan, c: int, users: dict[int, int] | None = None) -> dict[int, tuple]:
    """The products of chunk `c` the value path computes distributed, {k: (ch, a, b, u, v)}:
    op k = (u + b) * ch with u = ch * a (a product by a challenge `ch` of a sum whose other term is
    the same challenge times a base-field `a`; `b` base-field too) is ch^2 * a + ch * b, the same
    field element with 6 base products where (ch * a + b) * ch takes 9, once the chunk has ch^2
    (6 products, computed at its first use in the chunk): done for a challenge with at least
    DISTRIBUTE_MIN such products in the chunk. u and v = u + b must be read by nothing else and
    stored for no later chunk; the exact program keeps the IR's order (its words are the
    production's). The lookup / permutation / connection Qs of ../shared/pk compute their
    denominators (alpha * x + y) * alpha this way."""
    start, end = pl.chunks[c]
    users = single_users(ir) if users is None else users
    stored = set(pl.stores[c])
    found: dict[int, tuple] = {}
    for k in range(start, end):
        op = ir.ops[k]
        if (op.arith, op.shape) != ("mul", "33"):
            continue
        for x, ch in ((op.a, op.b), (op.b, op.a)):
            if not (isinstance(x, Val) and isinstance(ch, Leaf) and ch.kind == "challenge"):
                continue
            v = x.id
            add = ir.ops[v]
            if not (start <= v and users.get(v) == k and v not in stored
                    and (add.arith, add.shape) == ("add", "31") and isinstance(add.a, Val)):
                continue
            u = add.a.id
            mul = ir.ops[u]
            if not (start <= u and users.get(u) == v and u not in stored
                    and (mul.arith, mul.shape) == ("mul", "31") and mul.a == ch):
                continue
            found[k] = (ch, mul.b, add.b, u, v)
            break
    count: dict[Leaf, int] = {}
    for ch, *_ in found.values():
        count[ch] = count.get(ch, 0) + 1
    return {k: f for k, f in found.items() if count[f[0]] >= DISTRIBUTE_MIN}


@dataclass(frozen=True)
class ChunkForms:
    """What chunk `c` of a Q runs, decided on the IR before its text: `ops[i - start]` the op
    value i runs (on the value path its `value_op`), `dist` the products computed distributed
    (`distributed`: op k -> (ch, a, b, u, v)), `skip` the values not computed (a distributed
    product's u and v), `acc` the values kept as accumulators with their |hi| bounds
    (`acc_values`). The exact path: the IR's ops, nothing distributed, no accumulators."""

    start: int
    end: int
    value: bool
    ops: tuple[Op, ...]
    acc: dict[int, int]
    dist: dict[int, tuple]
    skip: frozenset[int]

    def op(self, i: int) -> Op:
        return self.ops[i - self.start]


def chunk_forms(ir: KernelIR, pl: Plan, c: int, value: bool = True,
                users: dict[int, int] | None = None) -> ChunkForms:
    start, end = pl.chunks[c]
    if not value:
        return ChunkForms(start, end, False, tuple(ir.ops[start:end]), {}, {}, frozenset())
    users = single_users(ir) if users is None else users
    dist = distributed(ir, pl, c, users)
    return ChunkForms(start, end, True, tuple(value_op(op) for op in ir.ops[start:end]),
                      acc_values(ir, pl, c, users), dist, frozenset(i for f in dist.values() for i in f[3:]))


# ============================================================================ literal words

def literal_positions(ir: KernelIR) -> list[tuple[int, int]]:
    """(op, operand) of every number literal of `ir`, in IR order (op by op, operand a before b)."""
    return [(i, j) for i, op in enumerate(ir.ops) for j, a in enumerate(op.args())
            if isinstance(a, Leaf) and a.kind == "number"]


def expr_shape(ir: KernelIR, at: Offsets, flags: tuple) -> tuple:
    """What an expression's kernel text is made of but its literals below 2^32: each op with its
    operands (a value; a literal of 2^32 or more as itself; any other leaf as `Offsets.key`: its
    slots and row bases, or the leaf where it keeps its own arithmetic), the output dim, `flags`
    (what else the kernel's template reads: num1, inv) and the count of `at`'s entries. `at` holds
    the expression's entries already (its text was rendered through it)."""

    def arg(a) -> object:
        if isinstance(a, Leaf):
            return "#" if a.kind == "number" and a.value < 1 << 32 else at.key(a)
        return a
    return (tuple((op.arith, op.shape, op.dim, arg(op.a), arg(op.b)) for op in ir.ops), ir.out_dim, flags,
            len(at.descs()))


def literal_words(irs: list[KernelIR], offsets: list[Offsets],
                  flags: list[tuple]) -> list[dict[tuple[int, int], int]]:
    """Expressions whose kernels would differ only in their number literals (bus and operation ids,
    ranges: what tells a lookup's or a permutation's expressions apart, beside their columns) read
    the literals that differ from their exps_offs, as they read their columns: an entry of kind
    OFF_WORD whose index is the literal's value (the launcher copies it: < 2^32; a larger one stays
    in the text, and only expressions with the same one there are alike), after the column entries.
    So they are one kernel (../shared/pk's ConnectionNew 40 -> 12 kernels, SpecifiedRanges 21 -> 3).
    The same words: the same ops on the same values, the literal from the constant bank instead of
    the instruction. A literal all of them share stays in the text; so does every literal of an
    expression alone in its shape (`expr_shape`). The literals are told apart by their place in
    IR order (`literal_positions`), the words numbered in that order.

    Per expression, {(op, operand): exps_offs slot} of the literals it reads as words (made in its
    `Offsets`, after its column entries); empty where it reads none."""
    groups: dict[tuple, list[int]] = {}
    for i, (ir, at, fl) in enumerate(zip(irs, offsets, flags)):
        groups.setdefault(expr_shape(ir, at, fl), []).append(i)
    out: list[dict[tuple[int, int], int]] = [{} for _ in irs]
    for members in groups.values():
        if len(members) < 2:
            continue
        pos = literal_positions(irs[members[0]])

        def value(m: int, p: tuple[int, int]) -> int:
            return irs[m].ops[p[0]].args()[p[1]].value
        differ = [p for p in pos if len({value(m, p) for m in members}) > 1]
        if not differ or len(offsets[members[0]].descs()) + len(differ) > OFFS_MAX:
            continue
        for m in members:
            out[m] = dict(zip(differ, offsets[m].add_words([value(m, p) for p in differ])))
    return out
