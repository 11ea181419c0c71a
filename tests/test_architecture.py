"""The layering of docs/architecture.md, checked on the source.

Every ``import`` of a fits module (at module level or inside a function) is read with
:mod:`ast`; a lower layer never imports a higher one, and no module imports another
module's private (underscore) name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layer of each fits package; a module may import only from layers it is allowed.
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "federation": {"core", "federation"},
    "analysis": {"core", "federation", "analysis"},
    "deploy": {"core", "federation", "analysis", "deploy"},
    "evaluation": {"evaluation"},
    "report": {"evaluation", "report", "core"},
}
#: Leaf helpers any layer may use.
BASE = {
    "fits._lazy",
    "fits._json",
    "fits._exact",
    "fits._dates",
    "fits._warnstate",
    "fits.io",
    "fits",
}
#: Known upward imports, each with its reason; the list should only shrink.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted((ROOT / "fits").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) for every ``import``/``from`` of a fits module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fits"):
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fits"):
                    found.append((alias.name, []))
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_layers_import_only_downwards(module: str, path: Path) -> None:
    layer = _layer(module)
    if layer is None:
        return  # the facade may import everything below it
    for target, _ in _imports(path):
        if target in BASE or (module, target) in EXCEPTIONS:
            continue
        target_layer = _layer(target)
        assert target_layer in ALLOWED[layer], (
            f"{module} (layer {layer}) imports {target}: docs/architecture.md allows "
            f"{sorted(ALLOWED[layer])}"
        )


def test_no_private_names_across_modules() -> None:
    offences = []
    for module, path in _modules():
        for target, names in _imports(path):
            for name in names:
                if name.startswith("_") and name != "__version__" and target != module:
                    offences.append(f"{module} imports {target}.{name}")
    assert not offences, offences


def test_exceptions_are_still_needed() -> None:
    """An exception that the code no longer needs is removed from the list."""
    used = {
        (module, target)
        for module, path in _modules()
        for target, _ in _imports(path)
        if (module, target) in EXCEPTIONS
    }
    assert used == set(EXCEPTIONS)
