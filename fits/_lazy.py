"""Lazy re-exports for package ``__init__`` modules, and lazily imported modules.

A package names its public parts in one mapping; each is imported on first use, so a
process that needs one part (a Flower site answering one message) does not pay for all
of them.  :func:`lazy_module` does the same for one heavy third-party module that only
some messages need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose names live in submodules.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (for the error message).
    exports : mapping of str to str
        Public name -> the module that defines it.
    """
    namespace = import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(import_module(exports[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


class _LazyModule(ModuleType):
    """A stand-in for a module, imported on the first attribute access."""

    def __getattr__(self, attr: str) -> Any:
        module = import_module(self.__name__)
        self.__dict__.update(module.__dict__)  # later lookups skip this method
        return getattr(module, attr)


def lazy_module(name: str) -> Any:
    """The module ``name``, imported when one of its attributes is first used.

    ``sparse = lazy_module("scipy.sparse")`` at the top of a module, then
    ``sparse.csr_matrix(...)`` where needed: a process that never reaches that line
    never imports scipy.sparse (a Flower site answering a setup or marginal message).
    """
    return _LazyModule(name)
