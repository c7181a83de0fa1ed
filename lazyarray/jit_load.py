"""Loading a compiled kernel from the disk cache without parsing its linking bitcode.

numba caches a kernel as its object code and, beside it, the LLVM bitcode of its module for
linking into another kernel that calls it. A load (``numba.core.codegen``'s ``_unserialize``)
parses that bitcode and walks every function and global of it to note the symbols it defines:
of a conv kernel's 13.5 ms CPU load on the development machine, 5.5 ms parsing and 4 ms walking
(with numba's lock events at every LLVM call), for a module that is only linked when a later
kernel calls this one without inlining it (none of a model's top-level kernels).

Here the cache entry keeps the defined symbols' names (``reduce``: walked once, in the process
that compiled the kernel, from the same module), and ``rebuild`` hands numba a library that
takes them as they are and parses the bitcode on its first link only (``linking_library``): the
library, its object code and its symbols are numba's own, so the kernel and its values are the
ones a plain load gives. An entry without names (written by an older lazyarray), a library numba
serialized some other way, or a numba whose internals differ take numba's own path.

``HeldIndex``: a cache whose index, read to look for a signature (``jit_signatures``), serves the
load that follows, so a load reads it once.
"""
from __future__ import annotations

import functools

TAG = "lazyarray.lazy-link/1"  # (marks an entry that carries its defined symbols' names)


def defined_symbols(module) -> tuple:
    """The names ``module`` defines (not declares): numba's ``JitEngine._load_defined_symbols``'s set."""
    return tuple(sorted({gv.name for gsets in (module.functions, module.global_variables) for gv in gsets
                         if not gv.is_declaration}))


@functools.lru_cache(maxsize=4)  # (one subclass per numba library class)
def linking_library(base, parse):
    """A subclass of numba's ``base`` library class whose module for linking is parsed (``parse``:
    llvmlite's ``parse_bitcode``) from the cached bitcode when first asked for."""
    class LazilyLinked(base):
        _lazy_bitcode = None

        def _get_module_for_linking(self):
            if self._shared_module is None and self._lazy_bitcode is not None:
                self._shared_module, self._lazy_bitcode = parse(self._lazy_bitcode), None
            return super()._get_module_for_linking()

    LazilyLinked.__name__ = LazilyLinked.__qualname__ = f"LazilyLinked{base.__name__}"
    return LazilyLinked


def fits(codegen) -> bool:
    """Whether ``codegen``'s library class and engine have what ``unserialize`` relies on."""
    base = getattr(codegen, "_library_class", None)
    return base is not None and all(hasattr(base, a) for a in (
        "_get_module_for_linking", "enable_object_caching", "_set_compiled_object", "_finalize_final_module")) \
        and isinstance(getattr(getattr(codegen, "_engine", None), "_defined_symbols", None), set)


def unserialize(codegen, state, names, parse):
    """numba's ``_unserialize`` of an object-code library ``state`` with its defined symbols ``names``
    given, its bitcode for linking parsed on first use (``linking_library``)."""
    name, kind, data = state
    object_code, shared_bitcode = data
    lib = linking_library(codegen._library_class, parse)(codegen, name)
    lib.enable_object_caching()
    lib._set_compiled_object(object_code)
    lib._lazy_bitcode = shared_bitcode
    lib._finalize_final_module()
    codegen._engine._defined_symbols |= set(names)
    return lib


def impl_class(base, compiler, parse):
    """numba's cache ``Impl`` class ``base`` (a ``CompileResultCacheImpl``) keeping the defined symbols'
    names in each entry and loading an entry that has them with ``unserialize``; ``compiler``:
    ``numba.core.compiler``."""
    class LazyLinkImpl(base):
        def reduce(self, cres):
            payload = super().reduce(cres)
            if payload[0][1] != "object":
                return payload
            return TAG, payload, defined_symbols(cres.library._get_module_for_linking())

        def rebuild(self, target_context, payload):
            if payload[0] != TAG:
                return super().rebuild(target_context, payload)
            _, payload, names = payload
            codegen = target_context.codegen()
            if not fits(codegen):
                return super().rebuild(target_context, payload)
            # (numba's ``CompileResult._rebuild``, its ``unserialize_library`` ours for this one call: a
            # load runs under numba's compiler lock, so no other load sees it)
            codegen.unserialize_library = functools.partial(unserialize, codegen, names=names, parse=parse)
            try:
                return compiler.CompileResult._rebuild(target_context, *payload)
            finally:
                del codegen.unserialize_library

    return LazyLinkImpl


class HeldIndex:
    """Mixed into numba's ``FunctionCache`` (``jit._disk_cache_class``): ``index()`` reads the index
    and keeps it (``held``) for the next ``_load_overload``, which takes its entry from it instead of
    reading the index again (numba's ``IndexDataCacheFile.load``, the same steps)."""

    held = None

    def index(self) -> dict:
        """The index's entries (key -> data file name) as numba reads them, kept for the next load."""
        self.held = self._cache_file._load_index()
        return self.held

    def _load_overload(self, sig, target_context):
        held, self.held = self.held, None
        if held is None or not self._enabled:
            return super()._load_overload(sig, target_context)
        name = held.get(self._index_key(sig, target_context.codegen()))
        try:
            data = None if name is None else self._cache_file._load_data(name)
        except OSError:  # (removed while the index still names it)
            return None
        return None if data is None else self._impl.rebuild(target_context, data)
