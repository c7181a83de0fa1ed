"""Simulated kills of a writer for the tests of atomic multi-file saves."""
import os


def kill_at_replace(monkeypatch, n: int) -> None:
    """``os.replace`` raises at its ``n``-th call (1-based): a writer killed just before that rename."""
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == n:
            raise KeyboardInterrupt("killed")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
