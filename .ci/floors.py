"""Print the lowest declared version of every run-time dependency, as pip pins.

``pip install $(python3 .ci/floors.py)`` installs exactly the floors of
``[project] dependencies`` in pyproject.toml (``numpy>=1.26`` -> ``numpy==1.26``), so
that CI can check that the floors still work.  A dependency without a floor is an error:
every one must say which version it needs.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def floors(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = []
    for dep in deps:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*(,.*)?", dep)
        if m is None:
            sys.exit(f"pyproject.toml: dependency {dep!r} has no '>=' floor")
        pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


if __name__ == "__main__":
    print(" ".join(floors()))
