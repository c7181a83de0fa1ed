"""A compiled kernel's call with writable arrays takes a signature it has for read-only ones.

numba types a read-only array apart from a writable one of the same dtype, dimensions and layout,
so a kernel handed both (``conv_blocked``'s residual: an empty read-only array where a layer has
none, the planned buffer where it has one) loads two signatures from the disk cache, or compiles
two, each 3-15 ms of a model's first call. numba's dispatcher could hand the writable arrays to
the read-only signature (a safe conversion: the code only reads them), but it takes a conversion
only where it may not compile, so it loads the second one.

``reuse_readonly(kernel)`` gives the numba dispatcher ``kernel`` a ``_compile_for_args`` (what
numba's C dispatcher calls where no signature matches a call's types exactly) that first looks
for a signature it already has whose arrays differ from the call's only in being read-only
where the call's are writable, everything else (dtype, dimensions, layout, alignment, every other
argument) the same: where it finds one, that signature's entry point is registered for the call's
types (numba's ``_insert``: later calls of those types go straight to it, in C) and runs the call;
elsewhere, where the kernel's disk cache holds such a signature (a process before this one
called it so), that one loads and runs the call; elsewhere numba loads or compiles as before. Only a signature that returns nothing or a number is
taken: an array it returned could be a view of a read-only argument, read-only where the other
signature's would be writable. The machine code numba makes for a read-only array is
that of a writable one (the flag only forbids writes when typing), so the values are the ones the
second signature would give, bit for bit; a layout that differs ('A' for 'C') is not taken, as
numba makes other code for it. The other way (read-only arrays where the kernel has writable
ones) cannot convert: numba loads that signature, which is why one on disk is preferred.
"""
from __future__ import annotations

import functools


def reuse_readonly(kernel, types) -> None:
    """Have the numba dispatcher ``kernel`` run a call whose arrays are writable by a signature it
    has with those arrays read-only (``_takes``); ``types``: ``numba.types``."""
    kernel._compile_for_args = functools.partial(_compile_for_args, kernel, types)


def _compile_for_args(kernel, types, *args, **kws):
    """numba's ``Dispatcher._compile_for_args`` (its C dispatcher calls it for a call no signature
    matches exactly, and calls the entry point it returns), a read-only signature taken first: one
    the kernel has, else one its disk cache holds (loaded)."""
    given = None if kws else _writable_call(kernel, types, args)
    entry = None if given is None else _readonly_entry(kernel, types, given)
    cache = getattr(kernel._cache, "made", None)
    if given is not None and entry is None and cache is not None:
        sig = _readonly_on_disk(kernel, cache(), given)
        if sig is not None:
            kernel.compile(sig)
            entry = _readonly_entry(kernel, types, given)
    if entry is not None:
        return entry
    try:  # (numba's load reads the index ``_readonly_on_disk`` read: ``held``)
        return type(kernel)._compile_for_args(kernel, *args, **kws)
    finally:
        if cache is not None and getattr(cache(), "held", None) is not None:
            cache().held = None


def _writable_call(kernel, types, args):
    """The numba types of ``args`` where one of them is a writable array, else None."""
    try:
        given = tuple(kernel.typeof_pyval(a) for a in args)
    except Exception:  # (a value numba cannot type: numba's own path says so)
        return None
    return given if any(type(t) is types.Array and t.mutable for t in given) else None


def _readonly_entry(kernel, types, given):
    """The entry point of a signature of ``kernel`` that takes arguments of the types ``given`` with
    some of their writable arrays as read-only ones, registered for ``given``; None where it has none."""
    for sig, cres in list(kernel.overloads.items()):
        if not cres.objectmode and _scalar(cres.signature.return_type, types) and len(sig) == len(given) \
                and all(map(_takes, sig, given)):
            kernel._insert([t._code for t in given], cres.entry_point, cres.objectmode)
            return cres.entry_point
    return None


def _readonly_on_disk(kernel, cache, given):
    """A signature in ``kernel``'s disk cache ``cache`` (``jit.LazyDiskCache``'s: its index's entries for
    this numba, CPU and code) that takes arguments of the types ``given`` (``_takes``), other than
    ``given`` itself; None where there is none or no disk cache."""
    try:
        key = cache._index_key(given, kernel.targetctx.codegen())
        keys = list(cache.index())
    except Exception:  # (no disk cache: numba's NullCache; an unreadable index)
        return None
    for k in keys:
        if k[1:] == key[1:] and k[0] != given and len(k[0]) == len(given) and all(map(_takes, k[0], given)):
            return k[0]
    return None


def _scalar(returned, types) -> bool:
    """Whether a signature's return type is nothing or a number (no array that could view an argument)."""
    return returned == types.none or isinstance(returned, (types.Number, types.Boolean))


def _takes(declared, given) -> bool:
    """Whether a signature's argument type ``declared`` takes a value of type ``given`` with the same
    machine code: the same type, or a read-only array where ``given`` is the same array writable."""
    if declared == given:
        return True
    return type(given) is type(declared) and getattr(given, "mutable", False) \
        and not getattr(declared, "mutable", True) and given.copy(readonly=True) == declared
