"""Shared fixtures. ``kernel_calls`` counts kernel calls, to prove what runs (and what does not) and when."""
import pytest

from lazyarray.ops.registry import OpDef


@pytest.fixture
def kernel_calls(monkeypatch):
    """A list that receives the op name of every kernel call made while the test runs."""
    calls: list[str] = []
    original = OpDef.bind

    def bind(self, xp):
        f = original(self, xp)

        def counted(*args, **kwargs):
            calls.append(self.name)
            return f(*args, **kwargs)

        return counted

    monkeypatch.setattr(OpDef, "bind", bind)
    return calls
