"""Tests of fits.datasets: the simulation design, the UCI loaders and the federated split."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fits import datasets as ds
from fits.datasets import (
    LINEAR_COEF,
    LINEAR_INTERCEPT,
    LINEAR_NOISE_SD,
    LOGISTIC_COEF,
    LOGISTIC_INTERCEPT,
    PAPER_SHARES,
    SIM_COVARIATES,
    ChecksumError,
    Dataset,
    federated_split,
    load_adult,
    load_bike,
    load_dataset,
    load_german,
    resolve_data_dir,
    simulate,
)

# The reference UCI files live beside the project: <repo>/../shared/datasets.
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
needs_data = pytest.mark.skipif(
    not (SHARED / "adult.data").is_file(),
    reason=f"reference UCI files not found at {SHARED} (expected ../shared/datasets)",
)

SIM_COLUMNS = ["X_B", "X_G1", "X_G2", "X_O", "X_L", "X_G3", "Y_lin", "Y_log"]
ADULT_CLIENTS = [10853, 7235, 3618, 3256, 2894, 2532, 2171, 1809, 1447, 362]
BIKE_CLIENTS = [4171, 2781, 1391, 1251, 1112, 973, 834, 695, 556, 139]


# ---------------------------------------------------------------------------------------
# simulate
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big() -> pd.DataFrame:
    return simulate(n=200_000, seed=12345).frame


def test_simulate_structure() -> None:
    d = simulate(n=500, seed=1)
    assert isinstance(d, Dataset)
    assert d.name == "simulation"
    assert list(d.frame.columns) == SIM_COLUMNS
    assert d.frame.shape == (500, 8)
    assert d.target == "Y_lin" and d.task == "regression"
    assert d.order == SIM_COLUMNS
    assert d.kinds == {
        "X_B": "nominal",
        "X_G1": "continuous",
        "X_G2": "continuous",
        "X_O": "ordinal",
        "X_L": "continuous",
        "X_G3": "continuous",
        "Y_lin": "continuous",
        "Y_log": "nominal",
    }
    for col in ("X_B", "X_O", "Y_log"):
        assert d.frame[col].dtype == np.int64, col
    for col in ("X_G1", "X_G2", "X_L", "X_G3", "Y_lin"):
        assert d.frame[col].dtype == np.float64, col
    assert set(d.frame["X_B"].unique()) <= {0, 1}
    assert set(d.frame["Y_log"].unique()) <= {0, 1}
    assert not d.frame.isna().any().any()
    lin = d.params["linear"]
    assert lin["intercept"] == LINEAR_INTERCEPT
    assert lin["coef"] == LINEAR_COEF and lin["noise_sd"] == LINEAR_NOISE_SD
    assert set(lin["coef"]) == set(SIM_COVARIATES)
    log = d.params["logistic"]
    assert log["intercept"] == LOGISTIC_INTERCEPT and log["coef"] == LOGISTIC_COEF


def test_simulate_logistic_target_shares_covariates() -> None:
    a = simulate(n=300, seed=7)
    b = simulate(n=300, seed=7, target="Y_log")
    assert b.target == "Y_log" and b.task == "classification"
    assert b.order == SIM_COLUMNS
    pd.testing.assert_frame_equal(a.frame, b.frame, check_exact=True)
    with pytest.raises(ValueError, match="target"):
        simulate(n=10, target="Y")
    with pytest.raises(ValueError, match="n must"):
        simulate(n=0)


def test_simulate_reproducible_and_seed_dependent() -> None:
    a = simulate(n=2_000, seed=3).frame
    b = simulate(n=2_000, seed=3).frame
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    c = simulate(n=2_000, seed=4).frame
    assert not np.array_equal(a["X_G1"].to_numpy(), c["X_G1"].to_numpy())
    assert not np.array_equal(a["Y_lin"].to_numpy(), c["Y_lin"].to_numpy())


def test_simulate_binary_and_gaussian_block(big: pd.DataFrame) -> None:
    assert big["X_B"].mean() == pytest.approx(0.45, abs=0.005)
    means = {0: (-1.0, 0.5), 1: (1.2, -0.7)}
    covs = {0: [[1.0, 0.6], [0.6, 1.5]], 1: [[1.6, -0.4], [-0.4, 0.8]]}
    for b in (0, 1):
        g = big.loc[big["X_B"] == b, ["X_G1", "X_G2"]].to_numpy()
        np.testing.assert_allclose(g.mean(axis=0), means[b], atol=0.02)
        np.testing.assert_allclose(np.cov(g.T), covs[b], atol=0.03)
        # Conditional Gaussianity of each coordinate.
        for j in range(2):
            z = (g[:, j] - means[b][j]) / np.sqrt(covs[b][j][j])
            assert stats.kstest(z, "norm").statistic < 0.01


def test_simulate_independent_gaussian(big: pd.DataFrame) -> None:
    g3 = big["X_G3"].to_numpy()
    assert g3.mean() == pytest.approx(0.0, abs=0.01)
    assert g3.std() == pytest.approx(1.0, abs=0.01)
    others = big[["X_B", "X_G1", "X_G2", "X_O", "X_L"]].to_numpy(dtype=float)
    corr = [np.corrcoef(g3, others[:, j])[0, 1] for j in range(others.shape[1])]
    np.testing.assert_allclose(corr, 0.0, atol=0.01)


def test_simulate_ordinal_probabilities(big: pd.DataFrame) -> None:
    # Z | X_B = b is Gaussian: mean 0.65 b + a' mu_b, variance 1 + a' Sigma_b a.
    assert set(big["X_O"].unique()) == {1, 2, 3, 4}
    a = np.array([0.45, -0.35])
    mu = {0: np.array([-1.0, 0.5]), 1: np.array([1.2, -0.7])}
    sigma = {0: np.array([[1.0, 0.6], [0.6, 1.5]]), 1: np.array([[1.6, -0.4], [-0.4, 0.8]])}
    cuts = np.array([-np.inf, -0.8, 0.25, 1.1, np.inf])
    marginal = np.zeros(4)
    for b, weight in ((0, 0.55), (1, 0.45)):
        m = 0.65 * b + a @ mu[b]
        sd = np.sqrt(1.0 + a @ sigma[b] @ a)
        probs = np.diff(stats.norm.cdf((cuts - m) / sd))
        marginal += weight * probs
        sub = big.loc[big["X_B"] == b, "X_O"]
        freq = sub.value_counts(normalize=True).reindex([1, 2, 3, 4]).to_numpy()
        np.testing.assert_allclose(freq, probs, atol=0.006)
    freq = big["X_O"].value_counts(normalize=True).reindex([1, 2, 3, 4]).to_numpy()
    np.testing.assert_allclose(freq, marginal, atol=0.005)


def test_simulate_ordinal_latent_given_covariates(big: pd.DataFrame) -> None:
    # P(X_O > 1 | x) = Phi(m(x) + 0.8): a probit of 1{X_O > 1} on m(x) has slope 1.
    m = 0.65 * big["X_B"] + 0.45 * big["X_G1"] - 0.35 * big["X_G2"]
    bins = pd.qcut(m, 20)
    above = (big["X_O"] > 1).groupby(bins, observed=True).mean()
    centre = m.groupby(bins, observed=True).mean()
    expected = stats.norm.cdf(centre.to_numpy() + 0.8)
    # Binning smooths the curve slightly, hence the tolerance.
    np.testing.assert_allclose(above.to_numpy(), expected, atol=0.03)


def test_simulate_laplace(big: pd.DataFrame) -> None:
    xb, g1, g2 = big["X_B"], big["X_G1"], big["X_G2"]
    xoc = big["X_O"] - 2.5
    mu = 0.40 * xb + 0.25 * g1 - 0.15 * g2 + 0.20 * xoc
    s = np.exp(-0.10 + 0.25 * xb + 0.08 * xoc)
    r = ((big["X_L"] - mu) / s).to_numpy()
    assert np.median(r) == pytest.approx(0.0, abs=0.01)
    assert np.mean(np.abs(r)) == pytest.approx(1.0, abs=0.015)
    assert np.var(r) == pytest.approx(2.0, abs=0.05)
    assert stats.kstest(r, "laplace").statistic < 0.01
    # The scale really varies with X_B and X_O (mean |X_L - mu| equals s per group).
    dev = (big["X_L"] - mu).abs()
    for (b, o), grp in dev.groupby([xb, big["X_O"]]):
        want = np.exp(-0.10 + 0.25 * b + 0.08 * (o - 2.5))
        assert grp.mean() == pytest.approx(want, rel=0.04), (b, o)


def test_simulate_linear_response(big: pd.DataFrame) -> None:
    x = big[list(SIM_COVARIATES)].to_numpy(dtype=float)
    design = np.column_stack([np.ones(len(x)), x])
    beta, *_ = np.linalg.lstsq(design, big["Y_lin"].to_numpy(), rcond=None)
    want = [LINEAR_INTERCEPT, *(LINEAR_COEF[c] for c in SIM_COVARIATES)]
    np.testing.assert_allclose(beta, want, atol=0.03)
    resid = big["Y_lin"].to_numpy() - design @ beta
    assert resid.std() == pytest.approx(LINEAR_NOISE_SD, rel=0.01)


def test_simulate_logistic_response(big: pd.DataFrame) -> None:
    from sklearn.linear_model import LogisticRegression

    y = big["Y_log"].to_numpy()
    assert 0.35 < y.mean() < 0.65
    x = big[list(SIM_COVARIATES)].to_numpy(dtype=float)
    fit = LogisticRegression(C=1e8, max_iter=2_000).fit(x, y)
    want = [LOGISTIC_COEF[c] for c in SIM_COVARIATES]
    np.testing.assert_allclose(fit.coef_[0], want, atol=0.06)
    assert fit.intercept_[0] == pytest.approx(LOGISTIC_INTERCEPT, abs=0.1)


# ---------------------------------------------------------------------------------------
# Dataset container
# ---------------------------------------------------------------------------------------


def test_dataset_validation() -> None:
    frame = pd.DataFrame({"a": [1.0, 2.0], "y": [0, 1]})
    d = Dataset("t", frame, {"a": "continuous", "y": "nominal"}, "y", "classification")
    assert d.order == ["a", "y"] and d.params == {} and d.description == ""
    with pytest.raises(ValueError, match="kinds"):
        Dataset("t", frame, {"a": "continuous"}, "y", "classification")
    with pytest.raises(ValueError, match="unknown kinds"):
        Dataset("t", frame, {"a": "numeric", "y": "nominal"}, "y", "classification")
    with pytest.raises(ValueError, match="target"):
        Dataset("t", frame, {"a": "continuous", "y": "nominal"}, "z", "classification")
    with pytest.raises(ValueError, match="task"):
        Dataset("t", frame, {"a": "continuous", "y": "nominal"}, "y", "clustering")
    with pytest.raises(ValueError, match="order"):
        Dataset("t", frame, {"a": "continuous", "y": "nominal"}, "y", "regression", ["a"])


# ---------------------------------------------------------------------------------------
# UCI loaders
# ---------------------------------------------------------------------------------------


@needs_data
def test_load_adult() -> None:
    d = load_adult(SHARED)
    f = d.frame
    assert f.shape == (45_222, 15)
    assert d.target == "income" and d.task == "classification"
    assert list(f.columns) == d.order and d.order[-1] == "income"
    assert not f.isna().any().any()
    assert set(f["income"].unique()) == {0, 1} and f["income"].dtype == np.int64
    assert f["income"].sum() == 11_208  # >50K rows after dropping missing values
    continuous = ["age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week"]
    assert sorted(c for c, k in d.kinds.items() if k == "continuous") == sorted(continuous)
    assert [c for c, k in d.kinds.items() if k == "ordinal"] == ["education-num"]
    assert d.kinds["income"] == "nominal" and d.kinds["workclass"] == "nominal"
    for col in [*continuous, "education-num"]:
        assert f[col].dtype == np.int64, col
    levels = {c: f[c].nunique() for c, k in d.kinds.items() if k != "continuous"}
    assert levels == {
        "workclass": 7,  # "Never-worked" rows all have a missing occupation
        "education": 16,
        "education-num": 16,
        "marital-status": 7,
        "occupation": 14,
        "relationship": 6,
        "race": 5,
        "sex": 2,
        "native-country": 41,
        "income": 2,
    }
    assert isinstance(f["workclass"].iloc[0], str)
    assert not f["workclass"].str.startswith(" ").any()  # ", " separator fully stripped


@needs_data
def test_load_bike() -> None:
    d = load_bike(SHARED)
    f = d.frame
    assert f.shape == (17_379, 13)
    assert d.target == "cnt" and d.task == "regression"
    for col in ("instant", "dteday", "casual", "registered"):
        assert col not in f.columns
    assert not f.isna().any().any()
    assert f["cnt"].mean() == pytest.approx(0.0, abs=1e-10)
    assert f["cnt"].std(ddof=0) == pytest.approx(1.0, abs=1e-10)
    raw = f["cnt"] * d.params["cnt_sd"] + d.params["cnt_mean"]
    np.testing.assert_allclose(raw, np.round(raw), atol=1e-8)
    assert raw.min() == pytest.approx(1) and raw.max() == pytest.approx(977)
    assert d.params["cnt_mean"] == pytest.approx(189.4631, abs=1e-3)
    kinds = {k: sorted(c for c, v in d.kinds.items() if v == k) for k in ds.KINDS}
    assert kinds == {
        "continuous": sorted(["temp", "atemp", "hum", "windspeed", "cnt"]),
        "ordinal": sorted(["season", "mnth", "hr", "weekday", "weathersit"]),
        "nominal": sorted(["yr", "holiday", "workingday"]),
    }
    assert f["hr"].nunique() == 24 and f["weathersit"].nunique() == 4
    assert d.order[-1] == "cnt"


@needs_data
def test_load_german() -> None:
    d = load_german(SHARED)
    f = d.frame
    assert f.shape == (1_000, 21)
    assert d.target == "credit_risk" and d.task == "classification"
    assert set(f["credit_risk"].unique()) == {0, 1} and f["credit_risk"].sum() == 300
    assert not f.isna().any().any()
    assert sorted(c for c, k in d.kinds.items() if k == "continuous") == sorted(
        ["duration", "credit_amount", "age"]
    )
    assert sorted(c for c, k in d.kinds.items() if k == "ordinal") == sorted(
        ["installment_rate", "residence_since", "existing_credits", "people_liable"]
    )
    nominal = [c for c, k in d.kinds.items() if k == "nominal"]
    assert len(nominal) == 14  # 13 A-coded attributes + the target
    for col in nominal:
        if col != "credit_risk":
            assert f[col].str.startswith("A").all(), col
    assert sorted(f["checking_status"].unique()) == ["A11", "A12", "A13", "A14"]
    assert f.iloc[0]["duration"] == 6 and f.iloc[0]["credit_amount"] == 1169


@needs_data
def test_checksum_mismatch_names_file(tmp_path: Path) -> None:
    target = tmp_path / "german.data"
    shutil.copyfile(SHARED / "german.data", target)
    raw = bytearray(target.read_bytes())
    raw[0] = ord("B")  # "A11" -> "B11"
    target.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="german.data") as info:
        load_german(tmp_path)
    assert isinstance(info.value, ValueError)
    assert "md5" in str(info.value)


def test_missing_file_names_path_and_source(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_bike(tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "bike_hour.csv") in msg
    assert "archive.ics.uci.edu" in msg and "FITS_DATA_DIR" in msg and "data_dir" in msg
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_german(tmp_path / "nowhere")


@needs_data
def test_missing_second_adult_file(tmp_path: Path) -> None:
    (tmp_path / "adult.data").symlink_to(SHARED / "adult.data")
    with pytest.raises(FileNotFoundError, match="adult.test"):
        load_adult(tmp_path)


@needs_data
def test_env_var_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FITS_DATA_DIR", str(SHARED))
    assert resolve_data_dir(None) == SHARED
    assert load_german().frame.shape == (1_000, 21)
    assert load_dataset("german").name == "german"
    # An explicit directory wins over the variable.
    monkeypatch.setenv("FITS_DATA_DIR", str(tmp_path))
    assert load_german(SHARED).frame.shape == (1_000, 21)
    with pytest.raises(FileNotFoundError, match="german.data"):
        load_german()


def test_no_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FITS_DATA_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="FITS_DATA_DIR"):
        resolve_data_dir(None)
    with pytest.raises(FileNotFoundError, match="FITS_DATA_DIR"):
        load_bike()
    assert resolve_data_dir("some/dir") == Path("some/dir")


@needs_data
def test_load_dataset_dispatch() -> None:
    sim = load_dataset("simulation")
    assert sim.frame.shape == (10_000, 8)
    pd.testing.assert_frame_equal(sim.frame, simulate(n=10_000, seed=0).frame)
    assert load_dataset("Bike", SHARED).name == "bike"
    assert load_dataset("adult", SHARED).frame.shape[0] == 45_222
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("iris", SHARED)


# ---------------------------------------------------------------------------------------
# federated_split
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "n_test", "sizes"),
    [(45_222, 9_045, ADULT_CLIENTS), (17_379, 3_476, BIKE_CLIENTS)],
)
def test_split_reproduces_paper_sizes(n: int, n_test: int, sizes: list[int]) -> None:
    frame = pd.DataFrame({"id": np.arange(n)})
    clients, test = federated_split(frame)
    assert len(test) == n_test
    assert [len(c) for c in clients] == sizes
    ids = np.concatenate([test["id"].to_numpy(), *(c["id"].to_numpy() for c in clients)])
    assert np.array_equal(np.sort(ids), np.arange(n))  # disjoint and exhaustive
    for part in [test, *clients]:
        assert isinstance(part.index, pd.RangeIndex) and part.index[0] == 0


def test_split_seeded() -> None:
    frame = pd.DataFrame({"id": np.arange(1_000), "v": np.linspace(0, 1, 1_000)})
    c1, t1 = federated_split(frame, seed=5)
    c2, t2 = federated_split(frame, seed=5)
    pd.testing.assert_frame_equal(t1, t2)
    for a, b in zip(c1, c2, strict=True):
        pd.testing.assert_frame_equal(a, b)
    c3, t3 = federated_split(frame, seed=6)
    assert not t1["id"].equals(t3["id"])
    assert list(t1.columns) == ["id", "v"] and t1["v"].dtype == np.float64
    assert not t1["id"].is_monotonic_increasing  # really shuffled


def test_split_shares_and_test_size() -> None:
    frame = pd.DataFrame({"id": np.arange(60)})
    clients, test = federated_split(frame, shares=(3, 2, 1), test_size=0.0)
    assert len(test) == 0 and [len(c) for c in clients] == [30, 20, 10]
    clients, test = federated_split(pd.DataFrame({"id": np.arange(10_000)}), shares=[1.0])
    assert len(test) == 2_000 and len(clients) == 1 and len(clients[0]) == 8_000
    # Every client gets at least one row.
    clients, _ = federated_split(
        pd.DataFrame({"id": np.arange(10)}), shares=(0.999, 0.001), test_size=0.0
    )
    assert [len(c) for c in clients] == [9, 1]


@pytest.mark.parametrize("shares", [(0.5, 0.5, 0.0), (0.7, -0.1, 0.4), (), (0.5, float("nan"))])
def test_split_bad_shares(shares: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="share"):
        federated_split(pd.DataFrame({"id": np.arange(100)}), shares=shares)


def test_split_bad_arguments() -> None:
    frame = pd.DataFrame({"id": np.arange(100)})
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="test_size"):
            federated_split(frame, test_size=bad)
    with pytest.raises(ValueError, match="at least one row"):
        federated_split(pd.DataFrame({"id": np.arange(8)}), shares=PAPER_SHARES)


@needs_data
def test_split_real_adult() -> None:
    frame = load_adult(SHARED).frame
    clients, test = federated_split(frame, seed=0)
    assert [len(c) for c in clients] == ADULT_CLIENTS and len(test) == 9_045
    assert all(list(c.columns) == list(frame.columns) for c in clients)
    assert all((c.dtypes == frame.dtypes).all() for c in clients)
