"""FedLSA with prior weights and an offset (``fedlsa(weights=, offset=)``,
``fits analyze --method fedlsa --weights --offset``).

Oracles: (1) FedLSA on the sites' design arrays with every row turned into
``(sqrt(w) x, sqrt(w) (y - o))`` (the reduction of the module docstring), bit for bit;
(2) statsmodels' WLS of ``y - o`` with ``weights=w`` on the pooled rows and its HC0
sandwich, the target and the width the one-pass regime's intervals are measured against.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.analysis.design import DesignError
from fits.analysis.lsa import FedLSAError, fedlsa, fedlsa_arrays

from conftest import fits_in_process as run

sm = pytest.importorskip("statsmodels.api")

#: short runs: the start is not forgotten, which these identities do not need
SHORT = pytest.mark.filterwarnings("ignore::fits.analysis.lsa.FedLSAConvergenceWarning")


def _tables(seed: int = 3, sizes: tuple[int, ...] = (3000, 2000, 1200)) -> dict[str, pd.DataFrame]:
    """A line fitted to a curve: the weights (large where ``a`` is large) move the
    slope of the best linear fit, and the offset is correlated with ``a``, so neither
    can be ignored without moving the estimate by many standard errors."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, m in enumerate(sizes):
        a = rng.normal(k * 0.2, 1.0, m)
        g = rng.choice(["u", "v"], m)
        o = 0.8 * a + rng.normal(size=m)
        w = np.exp(0.8 * a) * rng.uniform(0.5, 1.5, m)
        y = 1.0 + 0.5 * a + 0.4 * a**2 + 0.3 * (g == "v") + o + rng.normal(size=m)
        out[f"s{k + 1}"] = pd.DataFrame({"a": a, "g": g, "o": o, "w": w, "y": y})
    return out


TABLES = _tables()
POOLED = pd.concat(TABLES.values(), ignore_index=True)
X = pd.DataFrame({"const": 1.0, "a": POOLED["a"], "g=v": (POOLED["g"] == "v").astype(float)})


def _wls(weights: bool = True, offset: bool = True):  # type: ignore[no-untyped-def]
    y = POOLED["y"] - (POOLED["o"] if offset else 0.0)
    w = POOLED["w"] if weights else np.ones(len(POOLED))
    return sm.WLS(y, X, weights=w).fit(cov_type="HC0")


@SHORT
def test_weighted_fedlsa_is_fedlsa_on_the_transformed_rows() -> None:
    opts = {"rounds": 8, "local_steps": 5, "n_bootstrap": 20, "seed": 4}
    res = fedlsa(TABLES, "y", ["a", "g"], offset="o", weights="w", **opts)
    st = res.extra["standardization"]
    xs, ys = [], []
    for t in TABLES.values():
        a = (t["a"].to_numpy() - st.means[0]) / st.sds[0]
        x = np.column_stack([np.ones(len(t)), a, (t["g"] == "v").to_numpy(float)])
        root = np.sqrt(t["w"].to_numpy())
        xs.append(x * root[:, None])
        ys.append((t["y"].to_numpy() - t["o"].to_numpy()) * root)
    ref = fedlsa_arrays(xs, ys, names=list(TABLES), **opts)
    np.testing.assert_allclose(res.coef_, ref.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(res.bootstrap, ref.bootstrap, rtol=1e-12, atol=1e-14)
    plain = fedlsa(TABLES, "y", ["a", "g"], **opts)  # the same run without them differs
    assert np.abs(plain.coef_ - res.coef_).max() > 0.1


def test_one_pass_targets_the_pooled_wls_fit_and_its_sandwich() -> None:
    res = fedlsa(TABLES, "y", ["a", "g"], offset="o", weights="w", regime="one_pass", seed=1)
    ref = _wls()
    got, se = res.original_params.to_numpy(), ref.bse.to_numpy()
    assert np.all(np.abs(got - ref.params.to_numpy()) < 0.5 * se)
    ratio = res.original_bse.to_numpy() / se
    assert np.all((ratio > 0.75) & (ratio < 1.25)), ratio
    for other in (_wls(weights=False), _wls(offset=False)):  # each input matters
        assert np.abs(got - other.params.to_numpy()).max() > 5 * se.max()
    assert "prior weights: column 'w'" in res.summary()
    assert "offset: column 'o'" in res.summary()
    d = res.to_dict()
    assert d["weights"] == "w" and d["offset"] == "o"


@SHORT
def test_weights_errors_name_the_site_and_the_column() -> None:
    zero = {**TABLES, "s2": TABLES["s2"].assign(w=0.0)}
    with pytest.raises(DesignError, match="s2: weights column 'w' is 0 in all"):
        fedlsa(zero, "y", ["a", "g"], weights="w", rounds=4, local_steps=2)
    negative = {**TABLES, "s3": TABLES["s3"].assign(w=-1.0)}
    with pytest.raises(DesignError, match="s3: weights column 'w' has 1200 negative"):
        fedlsa(negative, "y", ["a", "g"], weights="w", rounds=4, local_steps=2)
    with pytest.raises(FedLSAError, match="weights must be a column name"):
        fedlsa(TABLES, "y", ["a", "g"], weights=3)  # type: ignore[arg-type]


@SHORT
def test_missing_weights_follow_the_missing_policy() -> None:
    holes = {**TABLES, "s1": TABLES["s1"].assign(w=TABLES["s1"]["w"].mask(np.arange(3000) < 7))}
    with pytest.raises(DesignError, match="s1: weights column 'w' has 7 missing"):
        fedlsa(holes, "y", ["a", "g"], weights="w", rounds=4, local_steps=2)
    with pytest.warns(UserWarning, match="7"):
        res = fedlsa(holes, "y", ["a", "g"], weights="w", rounds=4, local_steps=2, missing="drop")
    assert res.n_dropped is not None and list(res.n_dropped) == [7, 0, 0]
    assert list(res.n_rows) == [2993, 2000, 1200]


@pytest.fixture(scope="module")
def site_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("weighted")
    paths = []
    for name, frame in _tables(sizes=(400, 300)).items():
        paths.append(str(folder / f"{name}.csv"))
        frame.to_csv(paths[-1], index=False)
    return paths


@SHORT
def test_cli_fedlsa_with_weights_and_offset(site_files: list[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["--target", "y", "--features", "a,g", "--method", "fedlsa", "--family", "linear",
            "-R", "20", "-H", "5", "--bootstrap", "40", "--seed", "2",
            "--out", str(out), "-q"]  # fmt: skip
    proc = run("analyze", *site_files, *args, "--weights", "w", "--offset", "o")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())
    tables = {Path(p).stem: pd.read_csv(p) for p in site_files}
    ref = fedlsa(tables, "y", ["a", "g"], rounds=20, local_steps=5, n_bootstrap=40, seed=2,
                 weights="w", offset="o")  # fmt: skip
    np.testing.assert_allclose([c["coef"] for c in got["coefficients"]], ref.coef_)
    assert got["weights"] == "w" and got["offset"] == "o"
    assert "prior weights: column 'w'" in proc.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--exposure", "w"], "--exposure is the offset log(E) of a Poisson rate"),
        (["--weights", "w", "--max-weight", "3"], "FedLSA is not private"),
    ],
)
def test_cli_fedlsa_usage_errors(
    site_files: list[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "r.json"
    proc = run("analyze", *site_files, "--target", "y", "--method", "fedlsa", "--out", str(out),
               "-q", *extra)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert message in " ".join(proc.stderr.replace("│", " ").split()) and not out.exists()
