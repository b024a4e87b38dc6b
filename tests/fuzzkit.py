"""The mutation kit of the JSON fuzzer (tests/test_fuzz.py): the corpus of real AIR JSON, an
index of each document's paths by kind, hostile values, and `Fuzz`, which applies 1-3 random
mutations to one AIR's documents (copy-on-write; the corpus itself is never changed).

Its own small tests are in tests/test_fuzzkit.py.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from codegen import model

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
PK = ROOT.parent / "shared" / "pk"
#: AIRs left out of the mutation loop: Large (2 MB of JSON, 0.5 s per input) has Medium's shape
LOOP_EXCLUDE = {"Large"}


# ============================================================================ hostile values
#: every hostile string carries a marker that must never reach emitted C
#: (the templates' own comments use backquotes: "`" is no marker, "`PWNED`" is caught by "PWNED")
MARKERS = ("PWNED", "passwd", "\u202e", "\u2119", "\U0001d7d9", "\u0663", "{{", "{%", "%n", "$(",
           "??/", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "system(")
HOSTILE = (
    '1ull; system("PWNED"); //',
    '0); } void PWNED() { //',
    "*/ PWNED /*",
    '"; PWNED; "',
    "cm\nPWNED",
    "cm\r\n#define PWNED 1",
    '#include "/etc/passwd"',
    "../../etc/passwd",
    "/etc/passwd",
    "PWNED\x00cm",
    "\\\nPWNED",
    "??/\nPWNED",
    "\u202ePWNED",
    "\u2119\U0001d54e\u2115",          # ℙ𝕎ℕ
    "\U0001d7d9\U0001d7da",            # 𝟙𝟚 (str.isdigit() is True)
    "\u0663\u0664",                    # Arabic-Indic 34 (str.isdigit() is True)
    "{{ key }}PWNED",
    "{% raw %}PWNED",
    "%s%n%x PWNED",
    "$(PWNED)",
    "`PWNED`",
    "A" * 100_000 + "PWNED",
)
#: near-miss names (no marker: they must be refused, they cannot be injected)
OP_NAMES = model.OPS + ("div", "inv", "ADD", "Add", "add ", " add", "", "sub_swap", "mul\x00", "nop",
                        "copy; PWNED", "mul\nPWNED")
TYPE_NAMES = model.OPERAND_TYPES + ("CM", "tmp ", "Tmp", "const_", "zi", "", "airValue", "proofValue",
                                    "number;PWNED", "cm */PWNED")
INTS = (0, 1, 2, 3, 4, -1, -2, 7, 64, 65, (1 << 20), (1 << 20) + 1, -(1 << 20) - 1, (1 << 31) - 1, 1 << 31,
        1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, (1 << 64) + 1, -(1 << 63), 10 ** 30,
        -(10 ** 30), 10 ** 4000, 10 ** 5000)
RETYPE = ("3", "x", "", "0x3", 3.0, 1.5, -0.0, float("nan"), float("inf"), True, False, None, [], [3],
          [[]], {}, {"id": 3}, {"type": "cm"}, 3, -3)
LITERALS = ("0", "1", "2", "18446744073709551615", "18446744073709551616", "18446744069414584321",
            "18446744069414584320", "99999999999999999999", "999999999999999999999", "-1", "+1", "0x10",
            "0b1", "1e3", "1.0", " 7", "7 ", " 7 ", "\t7\n", "7 7", "", " ", "\u0663", "\U0001d7d9",
            "1_000", "0" * 25 + "7", "00", "7\x00", 7, 0, (1 << 64) - 1, 1 << 64, -1, 7.0, True, None, [7],
            "1ull; system(\"PWNED\"); //")
DIMS = (1, 3, 2, 0, -1, 4, 3.0, "3", True, None, 1 << 64)
PRIMES = (-1, 0, 1, 2, 5, -5, 1 << 20, (1 << 20) + 1, -(1 << 20) - 1, 1 << 40, 1.0, "1", None)
LIST_KEYS_SI = ("cmPolsMap", "openingPoints", "boundaries", "challengesMap", "evMap", "airValuesMap",
                "airgroupValuesMap", "proofValuesMap", "publicsMap", "customCommits")
SI_SCALARS = ("nStages", "qDim", "cExpId", "airgroupId", "airId", "nConstants", "nPublics")


# ============================================================================ the corpus
@dataclass
class Index:
    """Paths (tuples of keys / indices) of one JSON document, by kind."""

    all: list = field(default_factory=list)
    ints: list = field(default_factory=list)
    strs: list = field(default_factory=list)
    lists: list = field(default_factory=list)
    dicts: list = field(default_factory=list)
    operands: list = field(default_factory=list)    # {"type": ...} under src / dest
    steps: list = field(default_factory=list)       # {"op", "dest", "src"}
    codes: list = field(default_factory=list)       # expressionsCode[i].code
    hint_values: list = field(default_factory=list)


def index(doc: Any) -> Index:
    ix = Index()
    stack: list[tuple[tuple, Any]] = [((), doc)]
    while stack:
        path, v = stack.pop()
        if path:
            ix.all.append(path)
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            ix.ints.append(path)
        elif isinstance(v, str):
            ix.strs.append(path)
        elif isinstance(v, list):
            ix.lists.append(path)
            if path and path[-1] == "code":
                ix.codes.append(path)
            stack.extend((path + (i,), x) for i, x in enumerate(v))
        elif isinstance(v, dict):
            ix.dicts.append(path)
            if "type" in v and any(k in ("src", "dest") for k in path):
                ix.operands.append(path)
            if "op" in v and "src" in v:
                ix.steps.append(path)
            if "op" in v and path and path[0] == "hintsInfo":
                ix.hint_values.append(path)
            stack.extend((path + (k,), x) for k, x in v.items())
    for lst in (ix.all, ix.ints, ix.strs, ix.lists, ix.dicts, ix.operands, ix.steps, ix.codes, ix.hint_values):
        lst.sort(key=repr)
    return ix


@dataclass
class Air:
    name: str
    si: dict
    ei: dict
    isi: Index
    iei: Index


def _air_files() -> list[tuple[str, Path, Path]]:
    out, seen = [], set()
    for root in (SAMPLE, PK):
        if not root.is_dir():
            continue
        for si_p in sorted(root.rglob("*.starkinfo.json")):
            ex_p = si_p.with_name(si_p.name[: -len(".starkinfo.json")] + ".expressionsinfo.json")
            if not ex_p.is_file():
                continue
            digest = hashlib.sha256(si_p.read_bytes() + ex_p.read_bytes()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            out.append((str(si_p.relative_to(root.parent)), si_p, ex_p))
    return out


@functools.cache
def corpus() -> list[Air]:
    airs = []
    for name, si_p, ex_p in _air_files():
        if si_p.name[: -len(".starkinfo.json")] in LOOP_EXCLUDE:
            continue
        si, ei = json.loads(si_p.read_bytes()), json.loads(ex_p.read_bytes())
        airs.append(Air(name, si, ei, index(si), index(ei)))
    airs.sort(key=lambda a: len(a.iei.all))      # shrinking goes towards the smallest AIR
    return airs


# ============================================================================ mutation
class R:
    """Choices from a hypothesis-drawn `random.Random` (uniform, unlike st.integers, which favours
    the ends of a range; hypothesis still replays and shrinks a failing example)."""

    def __init__(self, data):
        self.rnd = data.draw(st.randoms(use_true_random=False))

    def int(self, lo: int, hi: int) -> int:
        return self.rnd.randint(lo, hi)

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, pct: int) -> bool:
        return self.int(0, 99) < pct


_DEL = object()


def update(node: Any, path: tuple, fn: Callable[[Any], Any]) -> Any:
    """A copy of `node` with the value at `path` replaced by fn(value) (`_DEL`: removed); only the
    containers on the path are copied. LookupError when the path no longer exists."""
    if not path:
        return fn(node)
    k = path[0]
    if isinstance(node, list) and isinstance(k, int) and 0 <= k < len(node):
        c = list(node)
    elif isinstance(node, dict) and not isinstance(k, int) and k in node:
        c = dict(node)
    else:
        raise LookupError(path)
    new = update(node[k], path[1:], fn)
    if new is _DEL:
        del c[k]
    else:
        c[k] = new
    return c


def get(node: Any, path: tuple) -> Any:
    for k in path:
        if isinstance(node, list) and isinstance(k, int) and 0 <= k < len(node):
            node = node[k]
        elif isinstance(node, dict) and not isinstance(k, int) and k in node:
            node = node[k]
        else:
            raise LookupError(path)
    return node


def _nested(depth: int) -> list:
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


class Fuzz:
    """One mutated AIR: the documents, the choices, what was injected."""

    def __init__(self, r: R, air: Air):
        self.r, self.air = r, air
        self.docs = {"si": air.si, "ei": air.ei}
        self.ix = {"si": air.isi, "ei": air.iei}
        self.labels: list[str] = []

    # -- helpers
    def which(self, pct_ei: int = 60) -> str:
        return "ei" if self.r.chance(pct_ei) else "si"

    def set(self, which: str, path: tuple, fn) -> None:
        self.docs[which] = update(self.docs[which], path, fn)

    def put(self, which: str, path: tuple, value) -> None:
        self.set(which, path, lambda _old: value)

    def hostile(self) -> str:
        return self.r.pick(HOSTILE)

    def paths(self, which: str, kind: str) -> list:
        p = getattr(self.ix[which], kind)
        if not p:
            raise LookupError(kind)
        return p

    # -- mutations: each raises LookupError when it does not apply (a no-op)
    def m_delete(self):
        w = self.which()
        self.put(w, self.r.pick(self.paths(w, "all")), _DEL)

    def m_retype(self):
        w = self.which()
        self.put(w, self.r.pick(self.paths(w, "all")), self.r.pick(RETYPE))

    def m_int(self):
        w = self.which()
        p = self.r.pick(self.paths(w, "ints"))
        v = get(self.docs[w], p)
        if self.r.chance(50) and isinstance(v, int):
            self.put(w, p, self.r.pick((v + 1, v - 1, v * 2, -v, v + 3, v * 3 + 1)))
        else:
            self.put(w, p, self.r.pick(INTS))

    def m_hostile(self):
        w = self.which()
        kind = "strs" if self.r.chance(50) else "all"
        self.put(w, self.r.pick(self.paths(w, kind)), self.hostile())

    def m_hostile_key(self):
        w = self.which()
        p = self.r.pick(self.paths(w, "dicts"))
        d = get(self.docs[w], p)
        h = self.hostile()
        if d and self.r.chance(50):
            k = self.r.pick(sorted(d))
            self.set(w, p, lambda old: {(h if kk == k else kk): vv for kk, vv in old.items()})
        else:
            self.set(w, p, lambda old: {**old, h: self.r.pick((1, h, [h], {h: h}))})

    def m_number(self):
        p = self.r.pick([x for x in self.paths("ei", "operands") if get(self.air.ei, x).get("type") == "number"]
                        or self.paths("ei", "operands"))
        self.put("ei", p + ("value",), self.r.pick(LITERALS))

    def m_rename(self):
        if self.r.chance(50):
            p = self.r.pick(self.paths("ei", "steps"))
            self.put("ei", p + ("op",), self.r.pick(OP_NAMES))
        else:
            p = self.r.pick(self.paths("ei", "operands"))
            self.put("ei", p + ("type",), self.r.pick(TYPE_NAMES))

    def m_ssa(self):
        p = self.r.pick(self.paths("ei", "codes"))
        code = get(self.docs["ei"], p)
        if not isinstance(code, list):
            raise LookupError("code")
        tmp_dests = [i for i, s in enumerate(code) if isinstance(s, dict) and isinstance(s.get("dest"), dict)
                     and s["dest"].get("type") == "tmp"]
        if len(tmp_dests) < 2:
            raise LookupError("no tmps")
        i, j = sorted((self.r.pick(tmp_dests), self.r.pick(tmp_dests)))
        variant = self.r.int(0, 2)
        if variant == 0 and i != j:        # a tmp written twice
            self.put("ei", p + (j, "dest", "id"), code[i]["dest"]["id"])
        elif variant == 1:                  # read before written: point an early tmp read at a later dest
            reads = [(k, n) for k, s in enumerate(code[: j + 1]) if isinstance(s, dict) and isinstance(s.get("src"), list)
                     for n, x in enumerate(s["src"]) if isinstance(x, dict) and x.get("type") == "tmp"]
            if not reads:
                raise LookupError("no tmp reads")
            k, n = self.r.pick(reads)
            self.put("ei", p + (k, "src", n, "id"), code[j]["dest"]["id"] if j >= k else 10 ** 6)
        else:                               # a tmp never written
            p2 = self.r.pick([x for x in self.paths("ei", "operands") if x[: len(p)] == p] or [p])
            self.put("ei", p2, {"type": "tmp", "id": self.r.pick((10 ** 6, (1 << 31) - 1)), "dim": self.r.pick((1, 3))})

    def m_dim(self):
        if self.r.chance(75):
            p = self.r.pick(self.paths("ei", "operands"))
            self.put("ei", p + ("dim",), self.r.pick(DIMS))
        else:
            p = self.r.pick([x for x in self.paths("si", "dicts") if x[:1] == ("cmPolsMap",) and len(x) == 2])
            self.put("si", p + ("dim",), self.r.pick(DIMS))

    def m_prime(self):
        ops = [x for x in self.paths("ei", "operands") if "prime" in get(self.air.ei, x)]
        if not ops:
            raise LookupError("no prime")
        openings = [o for o in self.docs["si"].get("openingPoints", []) if isinstance(o, int)]
        self.put("ei", self.r.pick(ops) + ("prime",), self.r.pick(tuple(openings) + PRIMES))

    def m_boundary(self):
        if self.r.chance(50):
            zis = [x for x in self.paths("ei", "operands") if get(self.air.ei, x).get("type") == "Zi"]
            if not zis:
                raise LookupError("no Zi")
            self.put("ei", self.r.pick(zis) + ("boundaryId",), self.r.pick((0, 1, 2, -1, 1 << 31, "0", None)))
        else:
            new = self.r.pick(([{"name": "everyRow"}, {"name": "firstRow"}], [{"name": "firstRow"}],
                               [{"name": "EveryRow"}], [], [{"name": "everyRow"}, {"name": "everyRow"}],
                               [{"name": "everyRow\x00"}], [{"name": self.hostile()}], [{"nam": "everyRow"}],
                               [{"name": "everyRow"}]))
            self.put("si", ("boundaries",), new)

    def m_swap(self):
        p = self.r.pick(self.paths("ei", "steps"))
        self.set("ei", p + ("src",), lambda s: s[::-1] if isinstance(s, list) else s)

    def m_truncate(self):
        p = self.r.pick(self.paths("ei", "codes"))
        n = len(get(self.docs["ei"], p))
        self.set("ei", p, lambda c: c[: self.r.int(0, max(n - 1, 0))])

    def m_list(self):
        w = self.which()
        p = self.r.pick(self.paths(w, "lists"))
        lst = list(get(self.docs[w], p))
        how = self.r.int(0, 4)
        if how == 0 and lst:                  # duplicate an entry
            lst.insert(self.r.int(0, len(lst)), lst[self.r.int(0, len(lst) - 1)])
        elif how == 1:                        # shuffle
            for i in range(len(lst) - 1, 0, -1):
                j = self.r.int(0, i)
                lst[i], lst[j] = lst[j], lst[i]
        elif how == 2 and lst:                # drop an entry
            del lst[self.r.int(0, len(lst) - 1)]
        elif how == 3:
            lst.reverse()
        else:
            lst = []
        self.put(w, p, lst)

    def m_si_field(self):
        k = self.r.pick(SI_SCALARS + ("nBits", "nBitsExt"))
        path = ("starkStruct", k) if k in ("nBits", "nBitsExt") else (k,)
        v = self.docs["si"].get(k) if len(path) == 1 else None
        if k == "cExpId" and self.r.chance(50):
            ids = [e.get("expId") for e in self.air.ei.get("expressionsCode", []) if isinstance(e, dict)]
            self.put("si", path, self.r.pick(ids + [10 ** 6]))
        elif isinstance(v, int) and self.r.chance(40):
            self.put("si", path, self.r.pick((v + 1, v - 1, 0, 1, 3, 16, 17)))
        else:
            self.put("si", path, self.r.pick(INTS + ("1", 1.0, None)))

    def m_cm_pol(self):
        n = len(self.docs["si"].get("cmPolsMap", []) or [])
        if not n:
            raise LookupError("no cmPolsMap")
        i = self.r.int(0, n - 1)
        f = self.r.pick(("stage", "dim", "stagePos"))
        self.put("si", ("cmPolsMap", i, f), self.r.pick((0, 1, 2, 3, 4, 5, 17, 2 ** 31 - 1, 2 ** 31, -1, 1 << 40)))

    def m_abi_stage(self):
        """nStages 3 with a used cm in stage 4: valid JSON, but the prover ABI has off_cm1..3 only."""
        cms = [get(self.air.ei, x).get("id") for x in self.paths("ei", "operands")
               if get(self.air.ei, x).get("type") == "cm"]
        cms = [c for c in cms if isinstance(c, int)]
        if not cms:
            raise LookupError("no cm")
        cid = self.r.pick(sorted(set(cms)))
        self.put("si", ("nStages",), self.r.pick((3, 4)))
        self.put("si", ("cmPolsMap", cid, "stage"), self.r.pick((4, 5)))

    def m_dest(self):
        p = self.r.pick(self.paths("ei", "steps"))
        what = self.r.int(0, 2)
        if what == 0:
            self.put("ei", p + ("dest", "type"), self.r.pick(("tmp", "q", "cm", "number", "public", "const")))
        elif what == 1:
            self.put("ei", p + ("dest", "id"), self.r.pick((0, 1, 2, 5, 10 ** 6, -1)))
        else:
            self.put("ei", p + ("dest", "dim"), self.r.pick((1, 3, 2)))

    def m_openings(self):
        ops = list(self.docs["si"].get("openingPoints", []) or [])
        how = self.r.int(0, 3)
        if how == 0 and ops:
            ops.pop(self.r.int(0, len(ops) - 1))
        elif how == 1:
            ops.append(self.r.pick((2, -2, 1 << 20, -(1 << 20) - 1, 1.0, "1")))
        elif how == 2 and ops:
            ops.append(ops[0])
        else:
            ops = [self.r.pick((0, 1, -1))]
        self.put("si", ("openingPoints",), ops)

    def m_hint(self):
        p = self.r.pick(self.paths("ei", "hint_values"))
        f = self.r.pick(("op", "id", "dim"))
        self.put("ei", p + (f,), self.r.pick(("tmp", "number", "cm", self.hostile(), 0, 1, 3, 2, -1, 10 ** 6, None)))

    def m_deep(self):
        w = self.which()
        self.put(w, self.r.pick(self.paths(w, "all")), _nested(self.r.pick((10, 100, 900, 5000))))

    def m_huge(self):
        w = self.which()
        p = self.r.pick(self.paths(w, "all"))
        self.put(w, p, self.r.pick((list(range(20_000)), "9" * 200_000, 10 ** 5000, {str(i): i for i in range(5000)})))

    MUTATIONS = ("m_delete", "m_retype", "m_int", "m_hostile", "m_hostile_key", "m_number", "m_rename",
                 "m_ssa", "m_dim", "m_prime", "m_boundary", "m_swap", "m_swap", "m_truncate", "m_list",
                 "m_si_field", "m_cm_pol", "m_abi_stage", "m_dest", "m_openings", "m_hint", "m_deep",
                 "m_huge", "m_number", "m_prime", "m_list")

    def mutate(self) -> None:
        for _ in range(1 + self.r.int(0, 2)):
            name = self.r.pick(self.MUTATIONS)
            try:
                getattr(self, name)()
                self.labels.append(name[2:])
            except (LookupError, TypeError, AttributeError):   # the path went away / changed type
                self.labels.append(name[2:] + ":noop")
