"""Category penalties per column (eq. 26's lambda_q and gamma_q): the kernels'
``column_penalties`` must name an ordinal or nominal column (a penalty of any other
would do nothing, and was ignored), and ``fits synthesize --column-penalty`` /
``--ordinal-penalty`` / ``--nominal-penalty`` set them as ``fits benchmark`` does."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.kernels import GaussianKernel, KNNKernel

from conftest import fits_in_process


def _sites() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    out = {}
    for name in ("a", "b"):
        hr = rng.integers(0, 24, 200)
        x = rng.normal(size=200)
        out[name] = pd.DataFrame(
            {
                "hr": hr,
                "w": rng.choice(["u", "v"], 200),
                "x": x.round(3),
                "cnt": (5.0 * ((hr > 7) & (hr < 10)) + x).round(3),
            }
        )
    return out


KINDS = {"hr": "ordinal", "w": "nominal"}


def test_penalties_must_name_a_discrete_column_in_its_range() -> None:
    sites = _sites()
    for kernel, says in [
        (KNNKernel(column_penalties={"x": 3.0}), r"'x' is a continuous column.*here: hr, w"),
        (KNNKernel(column_penalties={"zz": 3.0}), r"'zz' is no column"),
        (KNNKernel(column_penalties={"w": 3.0}), r"'w' is nominal.*\(0, 1\], got 3"),
        (GaussianKernel(column_penalties={"hr": -1.0}), r"'hr' is ordinal.*>= 0, got -1"),
        ({"a": "knn", "b": KNNKernel(column_penalties={"x": 1.0})}, r"'x' is a continuous"),
    ]:
        with pytest.raises(ValueError, match=rf"column_penalties\[.*{says}"):
            FITSSynthesizer(kernel, seed=0, kinds=KINDS).fit(sites)
    # a penalty on a discrete column is used: it changes the table
    plain = FITSSynthesizer("knn", seed=0, kinds=KINDS).fit(sites).sample(100)
    sharp = KNNKernel(column_penalties={"hr": 5.0})
    assert not FITSSynthesizer(sharp, seed=0, kinds=KINDS).fit(sites).sample(100).equals(plain)


def test_cli_column_and_ordinal_penalty(tmp_path) -> None:
    paths = []
    for name, table in _sites().items():
        paths.append(tmp_path / f"{name}.csv")
        table.to_csv(paths[-1], index=False)
    out = tmp_path / "out.csv"

    def run(*extra: str):
        return fits_in_process(
            "synthesize", *paths, "--rows", "100", "--out", out, "--kind", "hr=ordinal", *extra
        )

    res = run("--column-penalty", "hr=5")
    assert res.returncode == 0, res.stderr
    sharp = pd.read_csv(out)
    out.unlink()
    expected = FITSSynthesizer(
        KNNKernel(column_penalties={"hr": 5.0}), seed=0, kinds={"hr": "ordinal"}
    ).fit({p.stem: pd.read_csv(p) for p in paths})
    pd.testing.assert_frame_equal(sharp, expected.sample(100), check_dtype=False)
    assert run("--ordinal-penalty", "2", "--column-penalty", "w=0.05").returncode == 0
    out.unlink()
    for extra, says in [
        (("--column-penalty", "x=3"), "--column-penalty ['x']: 'x' is a continuous column"),
        (("--column-penalty", "w=3"), "'w' is nominal, so its penalty (gamma_q) must lie"),
        (("--column-penalty", "zz=1"), "--column-penalty: no column ['zz'] in the site tables"),
        (("--column-penalty", "hr=-1"), "the value must be a number >= 0"),
    ]:
        res = run(*extra)
        assert res.returncode == 2, (extra, res.stderr)
        assert says in " ".join(res.stderr.split()), res.stderr
        assert not out.exists()


def test_cli_nominal_penalty(tmp_path) -> None:
    """``--nominal-penalty G`` is every nominal column's gamma_q (the kernel's
    ``nominal_penalty``): fits synthesize gives the Python API's table with it, and a
    gamma_q outside (0, 1] is a usage error (exit 2) that says the range."""
    paths = []
    for name, table in _sites().items():
        paths.append(tmp_path / f"{name}.csv")
        table.to_csv(paths[-1], index=False)
    out = tmp_path / "out.csv"

    def run(*extra: str):
        return fits_in_process(
            "synthesize", *paths, "--rows", "100", "--out", out, "--kind", "hr=ordinal", *extra
        )

    res = run("--nominal-penalty", "0.5", "--kernel", "gaussian")
    assert res.returncode == 0, res.stderr
    got = pd.read_csv(out)
    out.unlink()
    tables = {p.stem: pd.read_csv(p) for p in paths}
    kernel = GaussianKernel(nominal_penalty=0.5)
    expected = FITSSynthesizer(kernel, seed=0, kinds={"hr": "ordinal"}).fit(tables).sample(100)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    plain = FITSSynthesizer("gaussian", seed=0, kinds={"hr": "ordinal"}).fit(tables).sample(100)
    assert not plain.equals(expected)  # it reaches the kernel
    for extra, says in [
        (("--nominal-penalty", "0"), "--nominal-penalty 0: gamma_q must lie in (0, 1]"),
        (("--nominal-penalty", "1.5"), "--nominal-penalty"),
        (("--nominal-penalty", "-1"), "--nominal-penalty"),
    ]:
        res = run(*extra)
        assert res.returncode == 2, (extra, res.stderr)
        assert says in " ".join(res.stderr.split()), res.stderr
        assert "Traceback" not in res.stderr
        assert not out.exists()
