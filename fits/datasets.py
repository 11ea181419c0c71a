"""Benchmark data sets and the federated split used in the FITS paper.

This module provides

* :func:`simulate` -- the paper's mixed-type simulation design (appendix D.2), with two
  responses, ``Y_lin`` (linear regression) and ``Y_log`` (logistic regression);
* :func:`load_adult`, :func:`load_bike`, :func:`load_german` -- loaders for three public
  UCI data sets, read from a local directory (the files are never shipped with fits);
* :func:`load_dataset` -- dispatch by name;
* :func:`federated_split` -- shuffle, hold out a test set and split the rest into
  clients of imbalanced sizes (the paper's shares :data:`PAPER_SHARES` by default).

Every data set comes back as a :class:`Dataset`: the preprocessed table, the kind of
every column (``"continuous"``, ``"ordinal"`` or ``"nominal"``), the response, the task,
the chain order and, for the simulation, the true downstream parameters.

The UCI files are looked up in ``data_dir``, else in the directory named by the
environment variable ``FITS_DATA_DIR``.  Each file's md5 is checked before it is read.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fits.core.schema import KINDS as SCHEMA_KINDS

#: The column kinds a :class:`Dataset` may use: every kind of the schema but ``"id"``
#: and ``"constant"`` (a data set's columns are all modelled).
KINDS: tuple[str, ...] = tuple(k for k in SCHEMA_KINDS if k not in ("id", "constant"))

__all__ = [
    "DATASET_NAMES",
    "DATA_DIR_ENV",
    "KINDS",
    "LINEAR_COEF",
    "LINEAR_INTERCEPT",
    "LINEAR_NOISE_SD",
    "LOGISTIC_COEF",
    "LOGISTIC_INTERCEPT",
    "MD5",
    "PAPER_SHARES",
    "SIM_COVARIATES",
    "ChecksumError",
    "Dataset",
    "federated_split",
    "load_adult",
    "load_bike",
    "load_dataset",
    "load_german",
    "resolve_data_dir",
    "simulate",
]

#: Client shares of the training data in the paper (section 6.1.1), ten clients.
PAPER_SHARES: tuple[float, ...] = (0.30, 0.20, 0.10, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04, 0.01)

#: Environment variable naming the directory that holds the UCI files.
DATA_DIR_ENV = "FITS_DATA_DIR"

#: Names accepted by :func:`load_dataset`.
DATASET_NAMES: tuple[str, ...] = ("simulation", "adult", "bike", "german")

#: md5 of every file the loaders read (byte-exact copies of the UCI files).
MD5: dict[str, str] = {
    "adult.data": "5d7c39d7b8804f071cdd1f2a7c460872",
    "adult.test": "35238206dfdf7f1fe215bbb874adecdc",
    "bike_hour.csv": "d50bd5a6f55131e72a7bedc334e2fce1",
    "german.data": "6b94c2e35480e671545e52a808a8a549",
}

_UCI_PAGES: dict[str, str] = {
    "adult": "https://archive.ics.uci.edu/dataset/2/adult",
    "bike": "https://archive.ics.uci.edu/dataset/275/bike+sharing+dataset",
    "german": "https://archive.ics.uci.edu/dataset/144/statlog+german+credit+data",
}

_FILE_HINTS: dict[str, str] = {
    "adult.data": "adult.data from the Adult archive",
    "adult.test": "adult.test from the Adult archive",
    "bike_hour.csv": "hour.csv from the Bike Sharing archive, saved as bike_hour.csv",
    "german.data": "german.data from the Statlog (German Credit Data) archive",
}


class ChecksumError(ValueError):
    """A data file's md5 differs from the expected one (corrupt or different file)."""


@dataclass
class Dataset:
    """A preprocessed table with the metadata FITS needs.

    Parameters
    ----------
    name : str
        Short name (``"simulation"``, ``"adult"``, ...).
    frame : pandas.DataFrame
        The preprocessed table, response column(s) included.
    kinds : dict of str to str
        Every column -> ``"continuous"``, ``"ordinal"`` or ``"nominal"``.
    target : str
        The response column of the downstream task.
    task : {"regression", "classification"}
        The downstream task.
    order : list of str, optional
        Chain order: covariates, then the response(s).  Default: the column order.
    params : dict, optional
        True parameters where known (simulation), preprocessing constants otherwise
        (e.g. the standardization of Bike's ``cnt``); may be empty.
    description : str, optional
        One paragraph on the source and the preprocessing.
    """

    name: str
    frame: pd.DataFrame
    kinds: dict[str, str]
    target: str
    task: str
    order: list[str] = field(default_factory=list)
    params: dict[str, object] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        cols = [str(c) for c in self.frame.columns]
        if len(set(cols)) != len(cols):
            raise ValueError(f"dataset {self.name!r}: duplicate column names")
        if set(self.kinds) != set(cols):
            raise ValueError(
                f"dataset {self.name!r}: kinds must name every column exactly; "
                f"missing {sorted(set(cols) - set(self.kinds))}, "
                f"unknown {sorted(set(self.kinds) - set(cols))}"
            )
        bad = {c: k for c, k in self.kinds.items() if k not in KINDS}
        if bad:
            raise ValueError(f"dataset {self.name!r}: unknown kinds {bad}; use one of {KINDS}")
        if self.target not in cols:
            raise ValueError(f"dataset {self.name!r}: target {self.target!r} is not a column")
        if self.task not in ("regression", "classification"):
            raise ValueError(
                f"dataset {self.name!r}: task must be 'regression' or 'classification', "
                f"not {self.task!r}"
            )
        if not self.order:
            self.order = list(cols)
        if sorted(self.order) != sorted(cols):
            raise ValueError(f"dataset {self.name!r}: order must name every column exactly once")


# ---------------------------------------------------------------------------------------
# Simulation (paper appendix D.2)
# ---------------------------------------------------------------------------------------

#: Covariates of the simulation, in the paper's chain order.
SIM_COVARIATES: tuple[str, ...] = ("X_B", "X_G1", "X_G2", "X_O", "X_L", "X_G3")

_SIM_PI_B = 0.45
_SIM_MEANS = np.array([[-1.0, 0.5], [1.2, -0.7]])  # rows: X_B = 0, X_B = 1
_SIM_COVS = np.array([[[1.0, 0.6], [0.6, 1.5]], [[1.6, -0.4], [-0.4, 0.8]]])
_SIM_Z_COEF = (0.65, 0.45, -0.35)  # latent Z of X_O on (X_B, X_G1, X_G2)
_SIM_CUTS = (-0.8, 0.25, 1.1)
_SIM_LAPLACE_MU = (0.40, 0.25, -0.15, 0.20)  # on (X_B, X_G1, X_G2, X_O - 2.5)
_SIM_LAPLACE_LOGS = (-0.10, 0.25, 0.08)  # log s = a + b X_B + c (X_O - 2.5)

# The paper's response coefficients (its Table S1) are not in its text; these are fits'
# own fixed choice: moderate effects, Y_log classes roughly balanced (about 50 % ones).
#: Intercept of ``Y_lin``.
LINEAR_INTERCEPT = 1.0
#: Coefficients of ``Y_lin`` on the covariates (``X_O`` enters as its value 1..4).
LINEAR_COEF: dict[str, float] = {
    "X_B": 1.0,
    "X_G1": 0.8,
    "X_G2": -0.6,
    "X_O": 0.5,
    "X_L": -0.7,
    "X_G3": 0.3,
}
#: Standard deviation of the Gaussian noise of ``Y_lin``.
LINEAR_NOISE_SD = 1.0
#: Intercept of the logit of ``P(Y_log = 1)``.
LOGISTIC_INTERCEPT = -1.2
#: Coefficients of the logit of ``P(Y_log = 1)`` (``X_O`` enters as its value 1..4).
LOGISTIC_COEF: dict[str, float] = {
    "X_B": 0.8,
    "X_G1": 0.6,
    "X_G2": -0.5,
    "X_O": 0.4,
    "X_L": -0.5,
    "X_G3": 0.4,
}


def simulate(n: int = 10_000, seed: int | None = 0, target: str = "Y_lin") -> Dataset:
    """Draw the paper's simulated mixed-type table (appendix D.2).

    Covariates, drawn along the chain order ``(X_B, X_G1, X_G2, X_O, X_L, X_G3)``:

    * ``X_B ~ Bernoulli(0.45)``;
    * ``(X_G1, X_G2) | X_B = 0 ~ N((-1.0, 0.5), [[1.0, 0.6], [0.6, 1.5]])`` and
      ``(X_G1, X_G2) | X_B = 1 ~ N((1.2, -0.7), [[1.6, -0.4], [-0.4, 0.8]])``;
    * ``X_O = 1 + #{c in (-0.8, 0.25, 1.1): Z > c}`` with
      ``Z = 0.65 X_B + 0.45 X_G1 - 0.35 X_G2 + eps``, ``eps ~ N(0, 1)``;
    * ``X_L ~ Laplace(mu, s)`` with ``mu = 0.40 X_B + 0.25 X_G1 - 0.15 X_G2 + 0.20 X_Oc``,
      ``s = exp(-0.10 + 0.25 X_B + 0.08 X_Oc)`` and ``X_Oc = X_O - 2.5``;
    * ``X_G3 ~ N(0, 1)``, independent of everything else.

    Responses (coefficients: :data:`LINEAR_INTERCEPT`, :data:`LINEAR_COEF`,
    :data:`LINEAR_NOISE_SD`, :data:`LOGISTIC_INTERCEPT`, :data:`LOGISTIC_COEF`; the paper
    does not print its own, so these are fits' fixed choice):

    * ``Y_lin = b0 + b'X + N(0, sigma^2)``;
    * ``Y_log ~ Bernoulli(sigmoid(c0 + c'X))``,

    where ``X`` holds the six covariates with ``X_O`` as its numeric value 1..4.  Both
    responses are drawn on the same covariate table and both stay in the frame; ``target``
    only chooses which one is the downstream response.

    Parameters
    ----------
    n : int, default 10_000
        Number of rows.
    seed : int or None, default 0
        Seed of :func:`numpy.random.default_rng`; ``None`` draws fresh entropy.
    target : {"Y_lin", "Y_log"}, default "Y_lin"
        ``"Y_lin"`` gives task ``"regression"``, ``"Y_log"`` task ``"classification"``.

    Returns
    -------
    Dataset
        Columns ``X_B`` (int 0/1, nominal), ``X_G1``, ``X_G2`` (float, continuous),
        ``X_O`` (int 1..4, ordinal), ``X_L``, ``X_G3``, ``Y_lin`` (float, continuous),
        ``Y_log`` (int 0/1, nominal).  ``params`` holds the true response parameters
        under ``"linear"`` and ``"logistic"`` (``intercept``, ``coef``, and
        ``noise_sd`` for the linear model).

    Notes
    -----
    One function of about 80 lines on purpose: every draw comes from one generator in
    the chain order above, so the code reads line by line as the design (and the
    order of the draws, which fixes the table for a seed, is in one place).
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer, not {n}")
    tasks = {"Y_lin": "regression", "Y_log": "classification"}
    if target not in tasks:
        raise ValueError(f"target must be 'Y_lin' or 'Y_log', not {target!r}")

    rng = np.random.default_rng(seed)
    xb = rng.binomial(1, _SIM_PI_B, size=n).astype(np.int64)

    chol = np.linalg.cholesky(_SIM_COVS)  # (2, 2, 2): one lower factor per X_B value
    std = rng.standard_normal((n, 2))
    g = _SIM_MEANS[xb] + np.einsum("nij,nj->ni", chol[xb], std)
    xg1, xg2 = g[:, 0], g[:, 1]

    a_b, a_1, a_2 = _SIM_Z_COEF
    z = a_b * xb + a_1 * xg1 + a_2 * xg2 + rng.standard_normal(n)
    xo = 1 + (z[:, None] > np.asarray(_SIM_CUTS)[None, :]).sum(axis=1).astype(np.int64)

    xoc = xo - 2.5
    m_b, m_1, m_2, m_o = _SIM_LAPLACE_MU
    mu = m_b * xb + m_1 * xg1 + m_2 * xg2 + m_o * xoc
    s_0, s_b, s_o = _SIM_LAPLACE_LOGS
    scale = np.exp(s_0 + s_b * xb + s_o * xoc)
    xl = rng.laplace(mu, scale)

    xg3 = rng.standard_normal(n)

    frame = pd.DataFrame(
        {
            "X_B": xb,
            "X_G1": xg1.astype(np.float64),
            "X_G2": xg2.astype(np.float64),
            "X_O": xo,
            "X_L": xl.astype(np.float64),
            "X_G3": xg3,
        }
    )
    x = frame[list(SIM_COVARIATES)].to_numpy(dtype=np.float64)
    b = np.array([LINEAR_COEF[c] for c in SIM_COVARIATES])
    y_lin = LINEAR_INTERCEPT + x @ b + LINEAR_NOISE_SD * rng.standard_normal(n)
    c = np.array([LOGISTIC_COEF[k] for k in SIM_COVARIATES])
    eta = LOGISTIC_INTERCEPT + x @ c
    prob = 1.0 / (1.0 + np.exp(-eta))
    y_log = (rng.random(n) < prob).astype(np.int64)
    frame["Y_lin"] = y_lin
    frame["Y_log"] = y_log

    kinds = {
        "X_B": "nominal",
        "X_G1": "continuous",
        "X_G2": "continuous",
        "X_O": "ordinal",
        "X_L": "continuous",
        "X_G3": "continuous",
        "Y_lin": "continuous",
        "Y_log": "nominal",
    }
    params: dict[str, object] = {
        "linear": {
            "intercept": LINEAR_INTERCEPT,
            "coef": dict(LINEAR_COEF),
            "noise_sd": LINEAR_NOISE_SD,
        },
        "logistic": {"intercept": LOGISTIC_INTERCEPT, "coef": dict(LOGISTIC_COEF)},
    }
    return Dataset(
        name="simulation",
        frame=frame,
        kinds=kinds,
        target=target,
        task=tasks[target],
        order=[*SIM_COVARIATES, "Y_lin", "Y_log"],
        params=params,
        description=(
            f"FITS paper simulation (appendix D.2), n={n}, seed={seed}: binary X_B, "
            "Gaussian X_G1, X_G2 given X_B, ordinal X_O (probit-type cut of a latent "
            "Gaussian), heteroscedastic Laplace X_L, independent X_G3; responses Y_lin "
            "(linear, Gaussian noise) and Y_log (logistic) with fits' fixed coefficients."
        ),
    )


# ---------------------------------------------------------------------------------------
# Real data: locating and checking files
# ---------------------------------------------------------------------------------------


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """Directory holding the UCI files.

    Parameters
    ----------
    data_dir : str, path-like or None
        An explicit directory; when ``None``, the environment variable ``FITS_DATA_DIR``
        is used.

    Returns
    -------
    pathlib.Path
        The directory (``~`` expanded).  Its existence is not checked here; the loaders
        report missing files one by one.

    Raises
    ------
    FileNotFoundError
        When neither ``data_dir`` nor ``FITS_DATA_DIR`` is given.
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    raise FileNotFoundError(
        "no data directory given: give the folder holding the UCI files (command line: "
        "--data-dir DIR; Python: data_dir=...) or set the environment variable "
        f"{DATA_DIR_ENV} to it (e.g. "
        f"`export {DATA_DIR_ENV}=/path/to/datasets`); see datasets/README.md"
    )


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checked_file(directory: Path, filename: str, dataset: str) -> Path:
    """Path of ``filename`` in ``directory`` after an existence and md5 check."""
    path = directory / filename
    if not path.is_file():
        where = "" if directory.is_dir() else f" (the directory {str(directory)!r} does not exist)"
        raise FileNotFoundError(
            f"{dataset} data file not found: expected {str(path)!r}{where}. Download "
            f"{_FILE_HINTS[filename]} from the UCI Machine Learning Repository "
            f"({_UCI_PAGES[dataset]}) and point fits at its directory with --data-dir DIR "
            f"(command line), data_dir=... (Python) or the {DATA_DIR_ENV} environment "
            "variable."
        )
    got = _md5(path)
    want = MD5[filename]
    if got != want:
        raise ChecksumError(
            f"{dataset} data file {str(path)!r} has md5 {got}, expected {want}: the file is "
            f"corrupt or not the UCI original. Download it again from {_UCI_PAGES[dataset]}."
        )
    return path


# ---------------------------------------------------------------------------------------
# Adult
# ---------------------------------------------------------------------------------------

_ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]
_ADULT_CONTINUOUS = ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week")
_ADULT_ORDINAL = ("education-num",)


def _read_adult_file(path: Path, skiprows: int) -> pd.DataFrame:
    return pd.read_csv(
        path,
        header=None,
        names=_ADULT_COLUMNS,
        sep=",",
        skipinitialspace=True,
        skiprows=skiprows,
        na_values=["?"],
        keep_default_na=False,
        skip_blank_lines=True,
        index_col=False,  # never a field as the row index
    )


def load_adult(data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """UCI Adult (Census Income), as preprocessed in the FITS paper (section 6.3.1).

    Reads ``adult.data`` and ``adult.test`` (the latter's first line is skipped and the
    trailing ``"."`` of its labels removed), treats ``"?"`` as missing and drops every row
    with a missing value: 45,222 of 48,842 rows remain (30,162 + 15,060, in file order).

    Parameters
    ----------
    data_dir : str, path-like or None
        Directory holding the files; default the ``FITS_DATA_DIR`` environment variable.

    Returns
    -------
    Dataset
        15 columns named as in ``adult.names``.  ``income`` is the target, coded int 0/1
        (``>50K`` = 1), task ``"classification"``.  Continuous: age, fnlwgt, capital-gain,
        capital-loss, hours-per-week (int64); ordinal: education-num (int64); nominal:
        the eight string columns and income.  Nothing is standardized.

    Raises
    ------
    FileNotFoundError
        A file is missing (the message names it and where to get it).
    ChecksumError
        A file's md5 is not the UCI original's.
    """
    directory = resolve_data_dir(data_dir)
    train = _read_adult_file(_checked_file(directory, "adult.data", "adult"), skiprows=0)
    test = _read_adult_file(_checked_file(directory, "adult.test", "adult"), skiprows=1)
    test["income"] = test["income"].str.rstrip(".")
    frame = pd.concat([train, test], ignore_index=True).dropna(how="any")
    frame = frame.reset_index(drop=True)
    labels = set(frame["income"].unique())
    if labels != {"<=50K", ">50K"}:
        raise ValueError(f"unexpected Adult income labels: {sorted(labels)}")
    frame["income"] = (frame["income"] == ">50K").astype(np.int64)
    for col in (*_ADULT_CONTINUOUS, *_ADULT_ORDINAL):
        frame[col] = frame[col].astype(np.int64)
    kinds = {
        c: (
            "continuous"
            if c in _ADULT_CONTINUOUS
            else "ordinal"
            if c in _ADULT_ORDINAL
            else "nominal"
        )
        for c in _ADULT_COLUMNS
    }
    return Dataset(
        name="adult",
        frame=frame,
        kinds=kinds,
        target="income",
        task="classification",
        order=list(_ADULT_COLUMNS),
        params={},
        description=(
            "UCI Adult (Census Income), adult.data + adult.test, rows with a missing "
            "value ('?') dropped (45,222 rows); income coded 1 for >50K, 0 for <=50K. "
            f"Source: {_UCI_PAGES['adult']} (CC BY 4.0)."
        ),
    )


# ---------------------------------------------------------------------------------------
# Bike Sharing
# ---------------------------------------------------------------------------------------

_BIKE_DROP = ("instant", "dteday", "casual", "registered")
_BIKE_CONTINUOUS = ("temp", "atemp", "hum", "windspeed", "cnt")
_BIKE_ORDINAL = ("season", "mnth", "hr", "weekday", "weathersit")
_BIKE_NOMINAL = ("yr", "holiday", "workingday")


def load_bike(data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """UCI Bike Sharing (hourly), as preprocessed in the FITS paper (section 6.3.1).

    Reads ``bike_hour.csv`` (the archive's ``hour.csv``), drops ``instant``, ``dteday``,
    ``casual`` and ``registered`` (``casual + registered = cnt``) and standardizes the
    response ``cnt`` to mean 0 and standard deviation 1 over the full file (population
    sd, ``ddof=0``).  The predictors are left as they are (the UCI file already scales
    temp, atemp, hum and windspeed to [0, 1]).

    Parameters
    ----------
    data_dir : str, path-like or None
        Directory holding the file; default the ``FITS_DATA_DIR`` environment variable.

    Returns
    -------
    Dataset
        17,379 rows, 13 columns.  Target ``cnt`` (float), task ``"regression"``;
        ``params["cnt_mean"]`` and ``params["cnt_sd"]`` undo the standardization
        (``cnt_raw = cnt * cnt_sd + cnt_mean``).  Continuous: temp, atemp, hum,
        windspeed, cnt; ordinal: season, mnth, hr, weekday, weathersit; nominal: yr,
        holiday, workingday (all int64).

    Raises
    ------
    FileNotFoundError
        The file is missing (the message names it and where to get it).
    ChecksumError
        The file's md5 is not the UCI original's.
    """
    directory = resolve_data_dir(data_dir)
    path = _checked_file(directory, "bike_hour.csv", "bike")
    frame = pd.read_csv(path, index_col=False).drop(columns=list(_BIKE_DROP))
    cnt = frame["cnt"].to_numpy(dtype=np.float64)
    mean = float(cnt.mean())
    sd = float(cnt.std(ddof=0))
    frame["cnt"] = (cnt - mean) / sd
    kinds: dict[str, str] = {}
    for col in frame.columns:
        if col in _BIKE_CONTINUOUS:
            kinds[col] = "continuous"
        elif col in _BIKE_ORDINAL:
            kinds[col] = "ordinal"
        elif col in _BIKE_NOMINAL:
            kinds[col] = "nominal"
        else:  # pragma: no cover - the md5 check pins the file's columns
            raise ValueError(f"unexpected Bike column {col!r}")
    return Dataset(
        name="bike",
        frame=frame,
        kinds=kinds,
        target="cnt",
        task="regression",
        order=list(frame.columns),
        params={"cnt_mean": mean, "cnt_sd": sd},
        description=(
            "UCI Bike Sharing, hourly (hour.csv), 17,379 rows; instant, dteday, casual "
            "and registered dropped; response cnt standardized over the full file "
            f"(mean {mean:.4f}, sd {sd:.4f}). Source: {_UCI_PAGES['bike']} (CC BY 4.0); "
            "Fanaee-T and Gama (2013)."
        ),
    )


# ---------------------------------------------------------------------------------------
# German credit
# ---------------------------------------------------------------------------------------

_GERMAN_COLUMNS = [
    "checking_status",  # A1x
    "duration",
    "credit_history",  # A3x
    "purpose",  # A4x
    "credit_amount",
    "savings",  # A6x
    "employment_since",  # A7x
    "installment_rate",
    "personal_status_sex",  # A9x
    "other_debtors",  # A10x
    "residence_since",
    "property",  # A12x
    "age",
    "other_installment_plans",  # A14x
    "housing",  # A15x
    "existing_credits",
    "job",  # A17x
    "people_liable",
    "telephone",  # A19x
    "foreign_worker",  # A20x
    "credit_risk",
]
_GERMAN_CONTINUOUS = ("duration", "credit_amount", "age")
_GERMAN_ORDINAL = ("installment_rate", "residence_since", "existing_credits", "people_liable")


def load_german(data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """UCI Statlog German Credit (``german.data``, the symbolic version).

    Parameters
    ----------
    data_dir : str, path-like or None
        Directory holding the file; default the ``FITS_DATA_DIR`` environment variable.

    Returns
    -------
    Dataset
        1,000 rows, 21 columns with snake_case names following ``german.doc``.  Target
        ``credit_risk`` (int, 1 = bad, i.e. the original code 2; 0 = good), task
        ``"classification"``.  Continuous: duration, credit_amount, age; ordinal:
        installment_rate, residence_since, existing_credits, people_liable (all int64);
        nominal: the 13 A-coded attributes (strings such as ``"A11"``) and credit_risk.

    Raises
    ------
    FileNotFoundError
        The file is missing (the message names it and where to get it).
    ChecksumError
        The file's md5 is not the UCI original's.
    """
    directory = resolve_data_dir(data_dir)
    path = _checked_file(directory, "german.data", "german")
    frame = pd.read_csv(
        path, sep=" ", header=None, names=_GERMAN_COLUMNS, keep_default_na=False, index_col=False
    )
    codes = set(frame["credit_risk"].unique())
    if not codes <= {1, 2}:
        raise ValueError(f"unexpected German credit target codes: {sorted(codes)}")
    frame["credit_risk"] = (frame["credit_risk"] == 2).astype(np.int64)
    kinds = {
        c: (
            "continuous"
            if c in _GERMAN_CONTINUOUS
            else "ordinal"
            if c in _GERMAN_ORDINAL
            else "nominal"
        )
        for c in _GERMAN_COLUMNS
    }
    return Dataset(
        name="german",
        frame=frame,
        kinds=kinds,
        target="credit_risk",
        task="classification",
        order=list(_GERMAN_COLUMNS),
        params={},
        description=(
            "UCI Statlog German Credit (german.data), 1,000 rows, 7 numerical and 13 "
            "A-coded categorical attributes; credit_risk 1 = bad (original 2), 0 = good. "
            f"Source: {_UCI_PAGES['german']} (CC BY 4.0)."
        ),
    )


# ---------------------------------------------------------------------------------------
# Dispatch and federated split
# ---------------------------------------------------------------------------------------


def load_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Load a data set by name.

    Parameters
    ----------
    name : {"simulation", "adult", "bike", "german"}
        Case-insensitive.  ``"simulation"`` is ``simulate(n=10_000, seed=0)`` (target
        ``Y_lin``) and ignores ``data_dir``.
    data_dir : str, path-like or None
        Directory holding the UCI files; default the ``FITS_DATA_DIR`` variable.

    Returns
    -------
    Dataset

    Raises
    ------
    ValueError
        Unknown name.
    """
    key = str(name).strip().lower()
    if key == "simulation":
        return simulate(n=10_000, seed=0)
    if key == "adult":
        return load_adult(data_dir)
    if key == "bike":
        return load_bike(data_dir)
    if key == "german":
        return load_german(data_dir)
    raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASET_NAMES)}")


def _client_sizes(n_train: int, shares: np.ndarray, min_rows: int = 1) -> np.ndarray:
    """Largest-remainder apportionment of ``n_train`` rows, at least ``min_rows`` each."""
    quotas = n_train * shares / shares.sum()
    sizes = np.floor(quotas).astype(np.int64)
    short = n_train - int(sizes.sum())
    if short > 0:
        # Largest remainders first; ties go to the earlier client (stable sort).
        ranked = np.argsort(-(quotas - sizes), kind="stable")
        sizes[ranked[:short]] += 1
    while (sizes < min_rows).any():  # give a short client one row from the largest one
        sizes[int(np.argmax(sizes))] -= 1
        sizes[int(np.argmax(sizes < min_rows))] += 1
    return sizes


def federated_split(
    frame: pd.DataFrame,
    shares: tuple[float, ...] | list[float] | np.ndarray = PAPER_SHARES,
    test_size: float = 0.2,
    seed: int | None = 0,
    min_rows: int = 1,
) -> tuple[list[pd.DataFrame], pd.DataFrame]:
    """Shuffle, hold out a test set, and split the rest into imbalanced clients.

    The rows are permuted with ``numpy.random.default_rng(seed)``; the first
    ``ceil(test_size * n)`` permuted rows form the test set, the rest are cut, in order,
    into ``len(shares)`` consecutive client blocks.  Client sizes are the largest-remainder
    apportionment of the training size to the normalized shares (floors of
    ``share * n_train`` first, then one more row to the clients with the largest
    fractional parts, ties to the earlier client), so they sum exactly to the training
    size; a client that would get fewer than ``min_rows`` rows takes one row at a time
    from the largest client until it has ``min_rows``.

    With the paper's shares this rule reproduces both of the paper's splits exactly:
    Adult, 45,222 rows -> 9,045 test, 36,177 train, clients
    (10853, 7235, 3618, 3256, 2894, 2532, 2171, 1809, 1447, 362); Bike, 17,379 rows ->
    3,476 test, 13,903 train, clients (4171, 2781, 1391, 1251, 1112, 973, 834, 695, 556,
    139).  (Rounding ``test_size * n`` to the nearest integer would give 9,044 for Adult,
    and plain rounding of each client's quota would give 1,390 for Bike's third client.)

    Parameters
    ----------
    frame : pandas.DataFrame
        The full table.
    shares : sequence of float, default :data:`PAPER_SHARES`
        Client proportions, all > 0; normalized to sum to 1 (a sum off 1 by more than
        1e-6 is accepted and rescaled).
    test_size : float, default 0.2
        Fraction held out as test data, in ``[0, 1)``; ``0`` gives an empty test frame.
    seed : int or None, default 0
        Seed of the permutation.
    min_rows : int, default 1
        Fewest rows a client gets (a FITS client needs 2, see
        :data:`fits.federation.client.MIN_CLIENT_ROWS`; the paper's splits are the
        same for 1 and 2).

    Returns
    -------
    clients : list of pandas.DataFrame
        One frame per share, in the order of ``shares``, index reset.
    test : pandas.DataFrame
        The held-out rows, index reset.

    Raises
    ------
    ValueError
        A share is not positive or not finite, ``shares`` is empty, ``test_size`` is
        outside ``[0, 1)``, or there are fewer training rows than ``min_rows`` per
        client.
    """
    arr = np.asarray(shares, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError("shares must hold at least one client share")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"every share must be a positive finite number, got {list(arr)}")
    if abs(float(arr.sum()) - 1.0) > 1e-6:
        arr = arr / arr.sum()
    test_size = float(test_size)
    if not 0.0 <= test_size < 1.0:
        raise ValueError(f"test_size must be in [0, 1), not {test_size}")

    n = len(frame)
    # A tiny tolerance keeps products such as 0.2 * 10_000 = 2000.0000000000002 at 2000.
    n_test = min(n, max(0, math.ceil(test_size * n - 1e-9)))
    n_train = n - n_test
    min_rows = int(min_rows)
    if min_rows < 1:
        raise ValueError(f"min_rows must be at least 1, got {min_rows}")
    if n_train < min_rows * arr.size:
        raise ValueError(
            f"{n_train} training rows cannot give each of {arr.size} clients at least "
            + ("one row" if min_rows == 1 else f"{min_rows} rows")
        )
    sizes = _client_sizes(n_train, arr, min_rows)

    perm = np.random.default_rng(seed).permutation(n)
    test = frame.iloc[perm[:n_test]].reset_index(drop=True)
    bounds = n_test + np.concatenate([[0], np.cumsum(sizes)])
    clients = [
        frame.iloc[perm[lo:hi]].reset_index(drop=True)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return clients, test
