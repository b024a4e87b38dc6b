"""tests/fuzzkit.py, the JSON fuzzer's mutation kit: copy-on-write updates, the path index, the
corpus, hostile values, and mutations that never touch the corpus."""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzkit import (_DEL, HOSTILE, MARKERS, Fuzz, R, _nested, corpus, get, index, update)

DOC = {"a": [1, {"type": "cm", "id": 2}], "code": [{"op": "add", "src": [{"type": "tmp", "id": 0}],
                                                    "dest": {"type": "tmp", "id": 1}}],
       "s": "x", "b": True}


def test_update_is_copy_on_write() -> None:
    before = copy.deepcopy(DOC)
    new = update(DOC, ("a", 1, "id"), lambda v: v + 40)
    assert new["a"][1]["id"] == 42 and DOC == before
    assert new["code"] is DOC["code"]                    # off-path containers are shared
    gone = update(DOC, ("a", 0), lambda _v: _DEL)
    assert gone["a"] == [{"type": "cm", "id": 2}] and DOC == before
    for bad in (("a", 5), ("zz",), ("a", "0"), ("s", 0)):
        with pytest.raises(LookupError):
            update(DOC, bad, lambda v: v)


def test_get() -> None:
    assert get(DOC, ("code", 0, "dest", "id")) == 1
    assert get(DOC, ()) is DOC
    with pytest.raises(LookupError):
        get(DOC, ("code", 1))


def test_index_kinds() -> None:
    ix = index(DOC)
    assert ("a", 0) in ix.ints and ("b",) not in ix.ints         # bools are no ints
    assert ix.strs == sorted([("a", 1, "type"), ("code", 0, "dest", "type"), ("code", 0, "op"),
                              ("code", 0, "src", 0, "type"), ("s",)], key=repr)
    assert ix.codes == [("code",)]
    assert ix.steps == [("code", 0)]
    assert ix.operands == sorted([("code", 0, "dest"), ("code", 0, "src", 0)], key=repr)   # not ("a", 1)
    assert len(ix.all) == len(set(ix.all)) == 17


def test_nested() -> None:
    assert _nested(3) == [[[[]]]]
    assert _nested(0) == []


def test_hostile_values_carry_a_marker() -> None:
    for h in HOSTILE:
        assert any(m in h for m in MARKERS), h[:40]


def test_corpus() -> None:
    airs = corpus()
    assert [len(a.iei.all) for a in airs] == sorted(len(a.iei.all) for a in airs)
    assert all("Large" not in a.name for a in airs)
    assert {a.name.split("/")[-1] for a in airs} >= {"Tiny.starkinfo.json", "Medium.starkinfo.json"}


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_mutations_never_touch_the_corpus(data) -> None:
    airs = corpus()[:3]
    frozen = [json.dumps([a.si, a.ei], sort_keys=True) for a in airs]
    r = R(data)
    f = Fuzz(r, r.pick(airs))
    f.mutate()
    assert 1 <= len(f.labels) <= 3
    assert all(lab.split(":")[0] in {m[2:] for m in Fuzz.MUTATIONS} for lab in f.labels)
    assert [json.dumps([a.si, a.ei], sort_keys=True) for a in airs] == frozen
    # a mutation that applied changed a copy: the docs are new objects unless every one was a no-op
    if not all(lab.endswith(":noop") for lab in f.labels):
        assert f.docs["si"] is not f.air.si or f.docs["ei"] is not f.air.ei
