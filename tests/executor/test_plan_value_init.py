"""The memory plan's ``Value`` and ``Step`` are built by one write of their fields (a compile makes one
per slot and step): they behave as the frozen dataclasses they are declared as, field for field."""
from __future__ import annotations

import dataclasses

import pytest

from lazyarray.executor.plan import Step, Value, plan_memory


def _reference(cls):
    """The same fields as a plain frozen dataclass (its generated ``__init__``)."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default)) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass("Ref" + cls.__name__, fields, frozen=True)


@pytest.mark.parametrize("args, kw", [
    ((16,), {}),
    ((0, "cpu(1)", True, None, True, "x", "csr"), {}),
    ((64,), {"view_of": 3, "view_at": 8, "view_stride": (2, 128), "name": "v"}),
])
def test_a_value_has_the_fields_a_dataclass_would_give_it(args, kw):
    v, ref = Value(*args, **kw), _reference(Value)(*args, **kw)
    assert dataclasses.asdict(v) == dataclasses.asdict(ref)
    assert repr(v) == repr(ref).replace("RefValue", "Value")
    assert v == Value(*args, **kw) and hash(v) == hash(Value(*args, **kw))
    assert v != dataclasses.replace(v, nbytes=v.nbytes + 1)
    assert dataclasses.replace(v, name="y").name == "y" and dataclasses.replace(v, name="y").view_of == v.view_of
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.nbytes = 1


def test_a_step_has_the_fields_a_dataclass_would_give_it():
    for args, kw in [(((0,), (1,)), {}), (((1, 2), (3,)), {"inplace": ((0, 0),), "name": "add", "workspace": 64})]:
        s, ref = Step(*args, **kw), _reference(Step)(*args, **kw)
        assert dataclasses.asdict(s) == dataclasses.asdict(ref)
        assert s == Step(*args, **kw) and hash(s) == hash(Step(*args, **kw))
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.name = "z"


def test_a_plan_from_them_is_the_documented_one():
    vals = [Value(16, external=True), Value(16), Value(16), Value(16, escapes=True)]
    steps = [Step((0,), (1,)), Step((1,), (2,), inplace=((0, 0),)), Step((2,), (3,))]
    p = plan_memory(vals, steps)
    assert (p.buffer_of, p.peak_bytes, p.naive_bytes) == ([None, 0, 0, 1], 32, 48)
