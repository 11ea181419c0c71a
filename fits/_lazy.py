"""Lazy re-exports for package ``__init__`` modules.

A package names its public parts in one mapping; each is imported on first use, so a
process that needs one part (a Flower site answering one message) does not pay for all
of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
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
