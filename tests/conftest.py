"""Shared fixtures: a mixed-type table with strong dependence, split over clients."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

#: The installed ``fits`` command of the interpreter running the tests (its venv), else
#: the one on PATH.
_HERE = Path(sys.executable).with_name("fits")
FITS = str(_HERE) if _HERE.exists() else (shutil.which("fits") or str(_HERE))

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def mixed_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Binary, continuous, ordinal (unequal gaps), nominal and continuous columns.

    Every column depends strongly on the earlier ones, so a column-wise independent
    resample is far from the joint distribution.
    """
    rng = np.random.default_rng(seed)
    b = rng.random(n) < 0.4
    x = np.where(b, 1.5, -1.0) + rng.normal(size=n)
    latent = 0.9 * x + 0.5 * rng.normal(size=n)
    o = np.select([latent < -1.0, latent < 0.5], [1, 2], 5)  # support {1, 2, 5}
    labels = np.array(["north", "south", "west"])
    c = labels[(np.digitize(x + 0.6 * rng.normal(size=n), [-0.5, 1.0]))]
    y = 2.0 * x - 1.5 * (c == "west") + 0.5 * o + 0.4 * rng.normal(size=n)
    return pd.DataFrame({"b": b, "x": x, "o": o, "c": c, "y": y})


def split(frame: pd.DataFrame, sizes: list[int]) -> list[pd.DataFrame]:
    """Consecutive blocks of the given sizes."""
    out, start = [], 0
    for m in sizes:
        out.append(frame.iloc[start : start + m].reset_index(drop=True))
        start += m
    return out


@pytest.fixture(scope="session")
def mixed_clients() -> list[pd.DataFrame]:
    """Three clients of unequal size (600, 300, 100 rows)."""
    return split(mixed_table(1000, seed=1), [600, 300, 100])
