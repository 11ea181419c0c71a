"""``fits analyze`` on site files, exit codes 0/1/2 (in this process: test_cli's run,
:func:`conftest.fits_in_process`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cli import run
from test_dp_glm import _tables


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("analyze")
    paths = []
    for k, t in enumerate(_tables("logistic", sizes=(300, 200, 250))):
        path = folder / f"hospital{k + 1}.csv"
        t.to_csv(path, index=False)
        paths.append(str(path))
    return paths


def test_analyze_writes_the_fit_and_the_privacy_spent(sites: list[str], tmp_path: Path) -> None:
    from fits.analysis.glm import fit_glm

    out = tmp_path / "result.json"
    proc = run(
        "analyze",
        *sites,
        "--target",
        "y",
        "--method",
        "fedsgd",
        "--epsilon",
        "3",
        "--delta",
        "1e-5",
        "--clip",
        "2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    tables = {Path(p).stem: pd.read_csv(p) for p in sites}
    ref = fit_glm(tables, "y", method="fedsgd", epsilon=3, delta=1e-5, clip=2.0, seed=0)
    np.testing.assert_allclose(list(result["params"].values()), ref.params.to_numpy())
    assert result["privacy"]["epsilon_site"] == pytest.approx(3.0, rel=1e-6)
    assert result["rounds"] == 3 + 50 and result["uploaded_bytes"] > 0
    assert result["clip_data_driven"] is False
    # a private fit: no standard errors, and the result says why
    assert result["bse"] is None and result["conf_int"] is None
    assert "not available for a private fit" in result["bse_note"]


@pytest.mark.parametrize("cov_type", [None, "HC0"])
def test_analyze_without_privacy_writes_standard_errors_and_intervals(
    sites: list[str], tmp_path: Path, cov_type: str | None
) -> None:
    from fits.analysis.glm import fit_glm
    from fits.io import read_table

    out = tmp_path / "result.json"
    extra = [] if cov_type is None else ["--cov-type", cov_type]
    proc = run("analyze", *sites, "--target", "y", "--method", "fedsgd", "--ci", "0.9",
               *extra, "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    # read as the command reads them: pandas' default CSV float parsing (pandas 2.x) can
    # differ from fits.io's round-trip parsing in the last bit
    tables = {Path(p).stem: read_table(p) for p in sites}
    ref = fit_glm(tables, "y", method="fedsgd", seed=0, cov_type=cov_type or "nonrobust")
    assert result["bse"] == {k: float(v) for k, v in ref.bse.items()}
    ci = ref.conf_int(0.1)
    assert result["conf_int"]["level"] == pytest.approx(0.9)
    assert result["conf_int"]["lower"] == {k: float(v) for k, v in ci[0].items()}
    assert result["conf_int"]["upper"] == {k: float(v) for k, v in ci[1].items()}
    assert result["cov_type"] == (cov_type or "nonrobust") and result["bse_note"] is None
    assert "std err" in proc.stdout and "[0.05" in proc.stdout and "0.95]" in proc.stdout
    none = tmp_path / "none.json"
    proc = run("analyze", *sites, "--target", "y", "--method", "fedsgd", "--cov-type", "none",
               "--out", str(none))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(none.read_text())["bse"] is None


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--mu", "0"], 2, "mu must be a positive"),
        (["--epsilon", "1", "--delta", "1.5"], 2, "delta must lie strictly between 0 and 1"),
        (["--method", "fedprox"], 2, "unknown method 'fedprox'"),
        (["--family", "gamma"], 2, "unknown family 'gamma'"),
        # FedLSA fits a linear regression: an explicit --family logistic is refused
        # (it used to pass as the option's default and fit a linear model anyway)
        (
            ["--method", "fedlsa", "--family", "logistic"],
            2,
            "FedLSA fits a linear regression, not 'logistic'",
        ),
        (["--method", "fedhybrid", "-K", "3"], 2, "do not apply to method 'fedhybrid'"),
        (
            ["--family", "poisson", "--method", "fedsgd", "--target", "x1"],
            1,
            "hospital1: target 'x1' must be a count",
        ),
        (["--target", "nope"], 2, "--target: no column ['nope'] in the site tables"),
        (["--seed", "-1"], 2, "Invalid value for '--seed'"),  # click words the rest by version
        # no name: an intercept-only fit (',') or every column ('') was fitted silently
        (["--features", ","], 2, "give column names separated by commas, got ','"),
        (["--features", ""], 2, "give column names separated by commas, got ''"),
        (["--features", "y,x1"], 2, "--features: the target 'y' cannot also be a feature"),
        (["--features", "x1,x1"], 2, "--features names ['x1'] more than once"),
        (["--cov-type", "HC3"], 2, "choose one of nonrobust, HC0, none, got 'HC3'"),
        (["--ci", "1.5"], 2, "must lie strictly between 0 and 1, got 1.5"),
        (
            ["--method", "fedlsa", "--target", "x1", "--cov-type", "HC0"],
            2,
            "--cov-type is not used by fedlsa",
        ),
        (  # 0 rounds or local steps is a value to refuse, not a request for the default
            ["--method", "fedlsa", "--family", "linear", "--target", "x1", "-R", "0"],
            2,
            "rounds must be a positive integer, got 0",
        ),
        (
            ["--method", "fedlsa", "--family", "linear", "--target", "x1", "-H", "0"],
            2,
            "local_steps must be a positive integer, got 0",
        ),
    ],
)
def test_analyze_errors(sites, tmp_path, args, code, message) -> None:
    out = tmp_path / "r.json"
    base = ["analyze", *sites, "--out", str(out)]
    if "--target" not in args:
        base += ["--target", "y"]
    proc = run(*base, *args)
    assert proc.returncode == code, proc.stderr
    assert message in " ".join(proc.stderr.replace("│", " ").split()), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_analyze_checks_its_paths_before_reading(sites: list[str], tmp_path: Path) -> None:
    """A missing site table is a usage error (exit 2), a table given twice is refused
    (its rows would count twice), and --out is checked before any round: a missing
    folder is not created, a link to an input is refused."""
    base = ["analyze", "--target", "y"]
    missing = run(*base, sites[0], str(tmp_path / "nope.csv"), "--out", str(tmp_path / "r.json"))
    assert missing.returncode == 2, missing.stderr
    assert "the site table" in missing.stderr and "nope.csv': no such file" in missing.stderr
    twice = run(*base, sites[0], sites[1], sites[0], "--out", str(tmp_path / "r.json"))
    assert twice.returncode == 2, twice.stderr
    assert "are the same file" in twice.stderr and "give each site's table once" in twice.stderr
    no_folder = tmp_path / "no" / "r.json"
    proc = run(*base, *sites, "--out", str(no_folder))
    assert proc.returncode == 2 and "does not exist" in proc.stderr, proc.stderr
    assert not no_folder.parent.exists()
    link = tmp_path / "link.json"
    link.symlink_to(sites[0])
    before = Path(sites[0]).read_bytes()
    proc = run(*base, *sites, "--out", str(link))
    assert proc.returncode == 2 and "fits never writes over an input" in proc.stderr
    assert link.is_symlink() and Path(sites[0]).read_bytes() == before
    for proc in (missing, twice):
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_column_the_model_does_not_use_does_not_stop_it(sites: list[str], tmp_path: Path) -> None:
    """A constant or all-missing column outside --features stopped every analysis with
    synthesis advice ("drop it ... add it back to the synthetic table") although fits
    analyze has no --drop; now only the named columns are merged, a constant column
    named for the model is refused with advice that fits an analysis, and without
    --features constant and all-missing columns are left out, with a warning."""
    from fits.analysis.glm import fit_glm

    paths = []
    for k, path in enumerate(sites):
        frame = pd.read_csv(path).assign(unit="mg", empty=np.nan)
        paths.append(tmp_path / f"site{k}.csv")
        frame.to_csv(paths[-1], index=False)
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "y", "--features", "x1,x2", "--out", out)
    assert proc.returncode == 0, proc.stderr
    tables = {p.stem: pd.read_csv(p) for p in paths}
    ref = fit_glm(tables, "y", features=["x1", "x2"], seed=0)
    np.testing.assert_allclose(list(json.loads(out.read_text())["params"].values()), ref.params)
    out.unlink()
    proc = run("analyze", *paths, "--target", "y", "--features", "x1,unit", "--out", out)
    assert proc.returncode == 1, proc.stderr
    assert "'unit' takes one value at every site" in proc.stderr
    assert "--features" in proc.stderr and "synthetic table" not in proc.stderr
    assert not out.exists()
    proc = run("analyze", *paths, "--target", "y", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "'unit' takes one value at every site" in proc.stderr
    assert "'empty' is missing in every row at every site" in proc.stderr
    assert "left out of the model" in proc.stderr and "synthetic table" not in proc.stderr


def test_analyze_prints_warnings_as_one_line_each(sites: list[str], tmp_path: Path) -> None:
    """FedLSA's convergence warning reached the terminal as Python shows it (the file
    path of fits/analysis/lsa.py and a line of its source); it is one 'warning:' line,
    and FedLSA's errors have no Python class name in front."""
    out = tmp_path / "r.json"
    base = ["analyze", *sites, "--target", "x1", "--family", "linear", "--method", "fedlsa"]
    proc = run(*base, "-R", "3", "-H", "1", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "warning: FedLSA has not forgotten its start after 3 rounds" in proc.stderr
    assert "lsa.py" not in proc.stderr and "run_fedlsa(" not in proc.stderr
    proc = run(*base, "-R", "100", "-H", "10", "--out", tmp_path / "r2.json")
    assert proc.returncode == 1 and proc.stderr.startswith("error: site(s) "), proc.stderr
    assert "FedLSAError" not in proc.stderr


def test_a_column_at_one_site_only_does_not_stop_named_features(
    sites: list[str], tmp_path: Path
) -> None:
    """A column that one site holds and the others do not ('extra') stopped every fit
    with 'columns differ ... Every client must hold the same columns', even with
    --features naming columns every site holds; now only the model's columns must be
    at every site, a site lacking one of them is named, and without --features the
    error says to name them."""
    frames = [pd.read_csv(p) for p in sites]
    paths = [tmp_path / f"site{k}.csv" for k in range(3)]
    frames[1].assign(extra=1.0).to_csv(paths[1], index=False)
    frames[0].to_csv(paths[0], index=False)
    frames[2].to_csv(paths[2], index=False)
    out = tmp_path / "r.json"
    proc = run("analyze", *paths, "--target", "y", "--features", "x1, x2", "--out", out)
    assert proc.returncode == 0, proc.stderr
    from fits.analysis.glm import fit_glm

    ref = fit_glm(frames, "y", features=["x1", "x2"], seed=0)
    np.testing.assert_allclose(list(json.loads(out.read_text())["params"].values()), ref.params)
    out.unlink()
    proc = run("analyze", *paths, "--target", "y", "--out", out)
    assert proc.returncode == 1 and "extra: ['extra']" in proc.stderr, proc.stderr
    assert "name the features" in proc.stderr and "--features" in proc.stderr
    frames[2].drop(columns=["x2"]).to_csv(paths[2], index=False)
    proc = run("analyze", *paths, "--target", "y", "--features", "x1,x2", "--out", out)
    assert proc.returncode == 1, proc.stderr
    assert "site2 has no column(s) ['x2'], which site0 holds" in proc.stderr
    assert not out.exists()


def test_a_target_of_distinct_whole_numbers_is_no_identifier(tmp_path: Path) -> None:
    """A Poisson target of large counts (a different whole number in every row) got
    'warning: column 'c' holds a different whole number in every row: it looks like a
    numeric identifier; as a feature it enters the model as a number', about the
    target; and fit_glm warned in synthesis's words ('its synthetic values are fresh
    draws ... --drop'). The target gets no warning; a feature gets the analysis's."""
    from fits.analysis.glm import fit_glm
    from fits.core.schema import NumericIdentifierWarning

    rng = np.random.default_rng(0)
    paths, frames = [], []
    for k in range(3):
        x = rng.normal(size=150)
        frames.append(
            pd.DataFrame(
                {"x": x, "c": rng.poisson(np.exp(12 + 0.3 * x)), "row": np.arange(150) + 150 * k}
            )
        )
        paths.append(tmp_path / f"s{k}.csv")
        frames[-1].to_csv(paths[-1], index=False)
    out = tmp_path / "r.json"
    proc = run(
        "analyze", *paths, "--target", "c", "--family", "poisson", "--features", "x", "--out", out
    )
    assert proc.returncode == 0, proc.stderr
    assert "identifier" not in proc.stderr, proc.stderr
    with pytest.warns(NumericIdentifierWarning) as caught:
        fit_glm(frames, "c", family="poisson")
    texts = [str(w.message) for w in caught if issubclass(w.category, NumericIdentifierWarning)]
    assert len(texts) == 1 and "'row'" in texts[0], texts
    assert "as a feature it enters the model as a number" in texts[0]
    assert "synthetic" not in texts[0] and "--drop" not in texts[0]


def test_kind_declares_an_integer_coded_category_nominal(tmp_path: Path) -> None:
    """An integer-coded category (region 1, 2, 3) could only enter fits analyze as one
    number, and the error for a missing value said 'declare it nominal' with no option
    to do it; --kind COL=nominal gives one coefficient per category (as fit_glm's
    kinds=), --kind COL=ordinal on text says which order its codes follow."""
    from fits.analysis.glm import fit_glm

    rng = np.random.default_rng(2)
    frames, paths = [], []
    for k, n in enumerate((200, 150, 180)):
        region = rng.integers(1, 4, n)
        x = rng.normal(size=n)
        eta = 0.3 * x + 0.8 * (region == 2) - 0.5 * (region == 3)
        frames.append(
            pd.DataFrame(
                {
                    "x": x,
                    "region": region,
                    "level": rng.choice(["low", "medium", "high"], n),
                    "y": (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int),
                }
            )
        )
        paths.append(tmp_path / f"s{k}.csv")
        frames[-1].to_csv(paths[-1], index=False)
    out = tmp_path / "r.json"
    base = ["analyze", *paths, "--target", "y", "--out", out]
    proc = run(*base, "--features", "x,region", "--kind", "region=nominal")
    assert proc.returncode == 0, proc.stderr
    params = json.loads(out.read_text())["params"]
    assert list(params) == ["(intercept)", "x", "region=2", "region=3"]
    ref = fit_glm(frames, "y", features=["x", "region"], kinds={"region": "nominal"})
    np.testing.assert_allclose(list(params.values()), ref.params, rtol=1e-12)
    proc = run(*base, "--features", "x,level", "--kind", "level=ordinal")
    assert proc.returncode == 0, proc.stderr
    assert "'high' < 'low' < 'medium'" in proc.stderr, proc.stderr
    for bad in (["--kind", "region=banana"], ["--features", "x", "--kind", "region=nominal"]):
        proc = run(*base, *bad)
        assert proc.returncode == 2 and "--kind" in proc.stderr, proc.stderr


def test_an_ordered_categorical_at_some_sites_only_is_named() -> None:
    """A column that one site holds as an ordered categorical (a Parquet file's) and
    another as text (a CSV file's) failed with "KeyError: 'categories'" (text site
    first) or 'the text site orders its categories differently' (ordered first)."""
    from fits.analysis.glm import fit_glm
    from fits.core.schema import SchemaError

    rng = np.random.default_rng(4)
    frames = []
    for n in (120, 100):
        frames.append(
            pd.DataFrame(
                {
                    "x": rng.normal(size=n),
                    "level": rng.choice(["low", "medium", "high"], n),
                    "y": rng.integers(0, 2, n),
                }
            )
        )
    ordered = frames[1].assign(
        level=pd.Categorical(frames[1].level, ["low", "medium", "high"], ordered=True)
    )
    for tables in (
        {"text": frames[0], "ordered": ordered},
        {"ordered": ordered, "text": frames[0]},
    ):
        with pytest.raises(SchemaError, match="'level' is an ordered categorical") as err:
            fit_glm(tables, "y", features=["x", "level"])
        assert "'low' < 'medium' < 'high') at ['ordered'] but not at ['text']" in str(err.value)


def test_a_feature_that_is_text_at_one_site_is_named_with_the_fix() -> None:
    """A feature written with decimal commas at one site ('0,35', text there) was
    refused as "column(s) ['x1'] are identifiers or free text (kind 'id'); they cannot
    be a feature or the target", without the site or the cause, and left out of a fit
    without --features as 'look like identifiers or free text at some site'."""
    from fits.analysis.glm import fit_glm
    from fits.core.schema import SchemaError

    rng = np.random.default_rng(5)
    frames = {}
    for name, n in (("a", 120), ("b", 100)):
        frames[name] = pd.DataFrame(
            {"x1": rng.normal(size=n), "x2": rng.normal(size=n), "y": rng.integers(0, 2, n)}
        )
    frames["b"] = frames["b"].assign(x1=[f"{v:.4f}".replace(".", ",") for v in frames["b"].x1])
    fix = (  # and what the text is, in the synthesis's words (unit_advice)
        "'x1' is text at ['b'] where ['a'] hold numbers: column 'x1' holds numbers written "
        "with a decimal comma (like '1.234,56' or '12,5', at b)"
    )
    with pytest.raises(SchemaError, match="cannot be the target or a feature") as err:
        fit_glm(frames, "y", features=["x1", "x2"])
    assert fix in str(err.value)
    with pytest.warns(UserWarning, match="are left out of the model") as caught:
        res = fit_glm(frames, "y")
    assert list(res.params.index) == ["(intercept)", "x2"]
    assert any(fix in str(w.message) for w in caught)


@pytest.mark.parametrize("flower", [False, True])
def test_a_site_table_of_a_header_alone_is_refused_with_the_fix(
    sites: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flower: bool
) -> None:
    """A site file with a header and no rows said only 'the table has a header but no
    rows' (in process), or started the Flower federation for its site to fail there;
    now at once, naming the site and what to do, as fits federate local does."""
    from fits.cli import federate

    empty = tmp_path / "clinic.csv"
    empty.write_text(Path(sites[0]).read_text().splitlines()[0] + "\n\n")
    started: list[object] = []
    monkeypatch.setattr(federate, "_launch", lambda: None)
    monkeypatch.setattr(federate, "run_local_federation", lambda *a, **k: started.append(a))
    out = tmp_path / "r.json"
    res = run("analyze", sites[0], empty, "--target", "y", "--out", out,
              *(["--flower"] if flower else []))  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip() == (
        f"error: {empty}: the table has a header but no rows; every site needs at least one "
        "row (site 'clinic'): leave the file out, or give it its rows"
    )
    assert not started and not out.exists()
