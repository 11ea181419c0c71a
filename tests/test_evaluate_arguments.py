"""fits.evaluate refuses a seed numpy would refuse, and one DataFrame given as the
clients, naming the argument (was numpy's "expected non-negative integer" and
"'str' object has no attribute 'columns'")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import evaluate


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.normal(size=n), "y": rng.integers(0, 2, n)})


@pytest.mark.parametrize(("seed", "error"), [(-1, ValueError), (1.5, TypeError)])
def test_a_bad_seed_names_the_parameter(seed, error):
    with pytest.raises(error, match=f"seed must be an integer >= 0, got {seed}"):
        evaluate(_table(50, 0), _table(50, 1), seed=seed)


@pytest.mark.parametrize("clients", ["one frame", [None]])
def test_clients_that_are_not_one_frame_per_site_are_refused(clients):
    real = _table(60, 0)
    given = real if clients == "one frame" else clients
    with pytest.raises(TypeError, match="`clients`"):
        evaluate(real, _table(60, 1), target="y", clients=given, privacy=False)
