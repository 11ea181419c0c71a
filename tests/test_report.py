"""Tests for fits.report (``fits.evaluate``) and the ``fits report`` command."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer, evaluate
from fits.core.schema import describe_table, merge_descriptions
from fits.datasets import federated_split, simulate
from fits.report.build import fmt_number, fmt_percent

from conftest import fits_in_process


@pytest.fixture(scope="module")
def setup():
    data = simulate(1200, seed=2)
    clients, test = federated_split(data.frame, shares=(0.5, 0.3, 0.2), seed=0)
    synth = FITSSynthesizer("knn", seed=0, kinds=data.kinds, order=data.order).fit(clients)
    synthetic = synth.sample(sum(len(c) for c in clients))
    return data, clients, test, synth, synthetic


@pytest.fixture(scope="module")
def report(setup):
    data, clients, test, synth, synthetic = setup
    return evaluate(
        data.frame,
        synthetic,
        data.kinds,
        target=["Y_lin", "Y_log"],
        test=test,
        clients=clients,
        settings=synth,
        reference_params={"Y_lin": data.params["linear"], "Y_log": data.params["logistic"]},
        boosting_iterations=25,
    )


def _numbers(value) -> list[float | int]:
    """Every number in a JSON document."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    return [value]


def test_html_is_self_contained(report) -> None:
    page = report.to_html()
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page and "url(" not in page
    sources = re.findall(r'<img[^>]*\ssrc="([^"]*)"', page)
    assert len(sources) == len(re.findall(r"<img\b", page)) >= 5
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    for anchor in re.findall(r'href="([^"]*)"', page):
        assert anchor.startswith("#")  # only links within the page


def test_json_holds_every_number_the_page_shows(report) -> None:
    data = json.loads(report.to_json())
    shown = {"–"}
    for number in _numbers(data):
        shown.update({fmt_number(number), fmt_percent(number)})
    page = report.to_html()
    cells = re.findall(r'<(?:td|span) class="num[^"]*"[^>]*>(.*?)</(?:td|span)>', page)
    assert len(cells) > 100
    for cell in cells:
        text = re.sub(r"</?b>", "", cell)
        assert text in shown, f"{text!r} is on the page but not in the JSON"
    # and the JSON has the headline numbers themselves
    assert data["energy"]["headline_columns"] == "covariates + Y_lin"
    table = data["energy"]["table"]
    assert set(table) == {"synthetic", "real held-out rows", "independent columns"}
    assert set(table["synthetic"]) == {"covariates", "covariates + Y_lin", "covariates + Y_log"}
    assert table["synthetic"]["covariates"] == pytest.approx(
        report.energy.loc["synthetic", "covariates"]
    )
    assert set(data["utility"]) == {"Y_lin", "Y_log"}
    assert data["utility"]["Y_lin"]["reference_source"] == "true parameters"
    assert data["privacy"]["baseline"] == "holdout"
    assert data["settings"]["synthesizer"] == "FITSSynthesizer"
    assert data["kinds"] == simulate(10, seed=0).kinds  # the kinds given, kept as they are


def test_numbers_make_sense(report, setup) -> None:
    data, clients, test, synth, synthetic = setup
    energy = report.energy
    assert list(energy.index) == ["synthetic", "real held-out rows", "independent columns"]
    # FITS keeps the dependence that an independent resample destroys
    assert (energy.loc["synthetic"] < energy.loc["independent columns"]).all()
    assert report.column_scores["score"].between(0.8, 1.0).all()
    m1 = report.utility["Y_lin"].table
    m1 = m1[(m1["mode"] == "M1") & (m1["model"] == "linear regression")]
    assert float(m1["param_error"].iloc[0]) < 1.0
    assert report.privacy is not None and report.privacy.synthetic_copies == 0
    lines = report.summary().splitlines()
    assert lines[0].startswith("fits fidelity report:")
    assert any(line.startswith("Energy distance (covariates + Y_lin") for line in lines)
    assert any(line.startswith("Utility (Y_log, logistic regression)") for line in lines)
    assert any(line.startswith("Privacy:") for line in lines)


def test_save_is_atomic_and_readable(report, tmp_path: Path) -> None:
    html_path = tmp_path / "report.html"
    json_path = tmp_path / "report.json"
    html_path.write_text("old")
    report.save(html_path, json_path)
    assert html_path.read_text(encoding="utf-8") == report.to_html()
    assert json.loads(json_path.read_text(encoding="utf-8"))["title"] == "fits fidelity report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert html_path.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(FileNotFoundError, match="does not exist"):
        report.save(tmp_path / "missing" / "report.html")
    from fits.io import OutputError

    with pytest.raises(OutputError, match="ends with '/', so it names a folder"):
        report.save(tmp_path / "r.html", f"{tmp_path / 'r.json'}/")  # nothing written
    assert not (tmp_path / "r.html").exists()
    target, link = tmp_path / "sub" / "page.html", tmp_path / "link.html"
    target.parent.mkdir()
    link.symlink_to(target)
    report.save(link)
    assert link.is_symlink() and target.read_text(encoding="utf-8") == report.to_html()


def test_kinds_inferred_without_target_or_split(setup) -> None:
    data, clients, test, synth, synthetic = setup
    result = evaluate(data.frame, synthetic, title="no target")
    payload = json.loads(result.to_json())
    # fits' schema inference: 0/1 and 1..4 integer columns are ordinal, floats continuous
    assert payload["kinds"]["X_G1"] == "continuous"
    assert payload["kinds"]["X_O"] == "ordinal"
    assert list(result.energy.columns) == ["all columns"]
    assert list(result.energy.index) == ["synthetic", "independent columns"]
    assert result.utility == {}
    assert result.privacy is not None and result.privacy.baseline == "leave-one-out"
    assert any("no target" in note for note in payload["notes"])
    page = result.to_html()
    assert "Not evaluated: no target column" in page and "leave-one-out" in page


def test_input_errors_name_the_problem(setup) -> None:
    data, clients, test, synth, synthetic = setup
    with pytest.raises(ValueError, match=r"synthetic table lacks column\(s\) \['X_L'\]"):
        evaluate(data.frame, synthetic.drop(columns="X_L"), data.kinds)
    with pytest.raises(ValueError, match="target 'nope'"):
        evaluate(data.frame, synthetic, data.kinds, target="nope")
    with pytest.raises(ValueError, match="test table lacks"):
        evaluate(data.frame, synthetic, data.kinds, test=test.drop(columns="X_B"))


def test_a_constant_real_column_is_compared_and_an_empty_one_named() -> None:
    """A real column with one value stopped the report with the synthesizer's advice
    ("constant across all clients ... add it back to the synthetic table"); it is
    compared as a nominal column, with a note. A column with no value (which a fit now
    writes as missing) is left out of the evaluation, with a note."""
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"x": rng.normal(size=60), "unit": "mg", "k": 3.0})
    synthetic = real.assign(x=rng.normal(size=60))
    rep = evaluate(real, synthetic, max_rows=60)
    assert rep.data["kinds"]["unit"] == rep.data["kinds"]["k"] == "nominal"
    scores = {s["column"]: s["score"] for s in rep.data["columns"]["scores"]}
    assert scores["unit"] == scores["k"] == 1.0
    assert any("['unit', 'k'] hold one value in every row" in n for n in rep.data["notes"])
    empty = real.assign(e=np.nan)
    rep = evaluate(empty, synthetic.assign(e=np.nan), max_rows=60)
    assert "e" not in rep.data["kinds"]
    assert any(
        "['e'] have no value in any row of the real table" in n and "left out" in n
        for n in rep.data["notes"]
    )
    with pytest.raises(ValueError, match=r"target 'e' has no value in any row"):
        evaluate(empty, synthetic.assign(e=np.nan), target="e")


# -- the command line ----------------------------------------------------------------------


def test_fits_report_command(tmp_path: Path) -> None:
    data = simulate(700, seed=5)
    clients, test = federated_split(data.frame, shares=(0.6, 0.4), seed=0)
    frame = data.frame.drop(columns="Y_log")
    paths = {}
    for name, table in {
        "real": frame,
        "test": test.drop(columns="Y_log"),
        "site_a": clients[0].drop(columns="Y_log"),
        "site_b": clients[1].drop(columns="Y_log"),
    }.items():
        paths[name] = tmp_path / f"{name}.csv"
        table.to_csv(paths[name], index=False)
    synthetic = pd.concat(clients, ignore_index=True).drop(columns="Y_log")
    rng = np.random.default_rng(0)
    synthetic["X_G1"] += rng.normal(0.0, 0.2, len(synthetic))
    paths["synthetic"] = tmp_path / "synthetic.parquet"
    synthetic.to_parquet(paths["synthetic"])
    schema = merge_descriptions([describe_table(frame)], ["real"], kinds={"X_B": "nominal"})
    paths["schema"] = tmp_path / "schema.json"
    paths["schema"].write_text(schema.to_json())
    out = tmp_path / "out.html"
    out_json = tmp_path / "out.json"
    done = fits_in_process(
        "report", "--real", paths["real"], "--synthetic", paths["synthetic"],
        "--out", out, "--json", out_json, "--target", "Y_lin",
        "--test", paths["test"], "--clients", paths["site_a"], paths["site_b"],
        "--schema", paths["schema"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"report: {out}" in done.stdout and f"json: {out_json}" in done.stdout
    assert "Energy distance" in done.stderr  # the summary
    payload = json.loads(out_json.read_text())
    assert payload["sources"]["client site_b"] == str(paths["site_b"])
    assert payload["kinds"]["X_B"] == "nominal"  # from the schema file (inference: ordinal)
    assert payload["kinds"]["X_O"] == "ordinal"
    assert list(payload["utility"]["Y_lin"]["rows"][0]) and payload["meta"]["rows"]["train"] == 560
    direct = [r for r in payload["utility"]["Y_lin"]["rows"] if r["mode"] == "direct"]
    assert [r["setting"] for r in direct] == ["Newton, non-private", "FedNewton, mu=1"]
    assert out.read_text().startswith("<!DOCTYPE html>")

    bad = tmp_path / "real.txt"
    bad.write_text("a,b\n1,2\n")
    done = fits_in_process("report", "--real", bad, "--synthetic", paths["synthetic"])
    assert done.returncode in (1, 2)
    assert str(bad) in done.stderr and ".txt" in done.stderr

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    done = fits_in_process("report", "--real", empty, "--synthetic", paths["synthetic"])
    assert done.returncode == 1
    assert str(empty) in done.stderr and "empty" in done.stderr


# -- a real browser --------------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_report_renders_in_headless_chromium(report, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip(
            "chromium is not installed (Debian: apt-get install chromium; CI installs it in "
            ".ci/run)"
        )
    page = tmp_path / "report.html"
    report.save(page)
    shot = tmp_path / "shot.png"
    profile = tmp_path / "profile"
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", f"--screenshot={shot}",
        "--window-size=1280,2000", page.resolve().as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert shot.exists(), f"no screenshot; chromium said: {done.stderr[-2000:]}"
    assert shot.stat().st_size > 20_000
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    assert float(pixels[..., :3].std()) > 0.05  # not a blank page


# -- escaping: names full of HTML, end to end -----------------------------------------------

EVIL = "<script>alert(1)</script> \"q\" 's' & co"
EVIL_TARGET = "Y<lin>&'\"</td>"


class _Page(HTMLParser):
    """Every start tag, every ``alt`` attribute and the visible text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.alts: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.alts.append(dict(attrs)["alt"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


#: Every tag the report's templates write.
PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "p", "div",
    "small", "span", "i", "b", "ul", "li", "nav", "a", "sub", "table", "tr", "th", "td",
    "img", "details", "summary", "code", "footer",
}  # fmt: skip


def _evil_tables(n: int = 500):
    data = simulate(n, seed=7)
    frame = data.frame.rename(columns={"X_B": EVIL, "Y_lin": EVIL_TARGET})
    frame[EVIL] = frame[EVIL].map(lambda v: f"<b>level</b> & '{v}'")
    kinds = {{"X_B": EVIL, "Y_lin": EVIL_TARGET}.get(c, c): k for c, k in data.kinds.items()}
    clients, test = federated_split(frame, shares=(0.6, 0.4), seed=0)
    synthetic = pd.concat(clients, ignore_index=True)
    rng = np.random.default_rng(0)
    synthetic["X_G1"] += rng.normal(0.0, 0.3, len(synthetic))
    return frame, kinds, clients, test, synthetic


def _check_escaped(page: str) -> _Page:
    assert "<script" not in page and "<b>level" not in page and '</td>"' not in page
    parsed = _Page()
    parsed.feed(page)
    assert set(parsed.tags) <= PAGE_TAGS, set(parsed.tags) - PAGE_TAGS
    text = "".join(parsed.text)
    assert EVIL in text and EVIL_TARGET in text  # shown, as text
    return parsed


def test_html_in_names_is_escaped_everywhere() -> None:
    frame, kinds, clients, test, synthetic = _evil_tables()
    report = evaluate(
        frame,
        synthetic,
        kinds,
        target=[EVIL_TARGET],
        test=test,
        clients={EVIL: clients[0], "site 'b' & <c>": clients[1]},
        settings={EVIL: EVIL, "list": [EVIL]},
        sources={"real": EVIL},
        title=EVIL,
        boosting_iterations=5,
    )
    page = report.to_html()
    parsed = _check_escaped(page)
    assert f"<title>{html.escape(EVIL, quote=False)}" in page.replace("&#39;", "'").replace(
        "&#34;", '"'
    )
    # the figure's alt text names the target, escaped inside the attribute
    assert f"utility per client, {EVIL_TARGET}" in parsed.alts
    assert json.loads(report.to_json())["targets"] == [EVIL_TARGET]  # JSON keeps the names


def test_fits_report_escapes_html_in_names(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fits.cli.main import app

    frame, kinds, clients, test, synthetic = _evil_tables(400)
    paths = {}
    site = "site <a> & 'b'"
    for name, table in {"real": frame, "synthetic": synthetic, site: clients[0]}.items():
        paths[name] = tmp_path / f"{name}.csv"
        table.to_csv(paths[name], index=False)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({EVIL: EVIL}))
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        app,
        [
            "report", "--real", str(paths["real"]), "--synthetic", str(paths["synthetic"]),
            "--out", str(out), "--target", EVIL_TARGET, "--clients", str(paths[site]),
            "--settings", str(settings), "--quiet",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    parsed = _check_escaped(out.read_text(encoding="utf-8"))
    assert f"utility per client, {EVIL_TARGET}" in parsed.alts
    assert site in "".join(parsed.text)


def test_templates_are_package_data() -> None:
    """A non-editable install ships every template (pyproject's package-data globs)."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = config["package-data"]["fits.report.templates"]
    assert "fits.report.templates" in config["packages"]
    folder = root / "fits" / "report" / "templates"
    files = [p.relative_to(folder).as_posix() for p in folder.iterdir()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), files


def test_boosting_comparison_section(report, setup) -> None:
    """The report's real-vs-synthetic boosting scores are boosting_comparison's on the
    clients' rows, the synthetic table and the held-out rows; page and summary show them."""
    from fits.evaluation.utility import boosting_comparison

    data, clients, test, synth, synthetic = setup
    train = pd.concat(clients, ignore_index=True)
    covariates = [c for c in data.frame.columns if c not in ("Y_lin", "Y_log")]
    got = json.loads(report.to_json())["boosting"]
    assert set(got) == {"Y_lin", "Y_log"}
    for target, metric in (("Y_lin", "r2"), ("Y_log", "roc_auc")):
        direct = boosting_comparison(
            train, synthetic, test, target, data.kinds, covariates=covariates, seed=0
        )
        assert got[target]["metric"] == metric
        assert got[target]["real"][metric] == pytest.approx(direct.real[metric], abs=1e-12)
        assert got[target]["synthetic"][metric] == pytest.approx(
            direct.synthetic[metric], abs=1e-12
        )
        assert got[target]["n_test"] == len(test)
    page = report.to_html()
    assert "trained on the real training rows and on the synthetic table" in page
    assert fmt_number(got["Y_log"]["synthetic"]["roc_auc"]) in page
    lines = report.summary().splitlines()
    assert any(line.startswith("Gradient boosting (Y_log, scikit-learn defaults") for line in lines)


def test_boosting_comparison_needs_training_rows(setup) -> None:
    data, clients, test, synth, synthetic = setup
    rep = evaluate(
        data.frame, synthetic, data.kinds, target="Y_lin", test=test, boosting_iterations=5,
        privacy=False,
    )  # fmt: skip
    assert rep.data["boosting"] == {}
    assert any("gradient-boosting comparison" in n for n in rep.data["notes"])


def test_fits_report_refuses_a_client_file_given_twice(tmp_path: Path) -> None:
    """--clients a.csv b.csv a.csv counted a's rows twice (training rows, M2-M4) without a
    word; like fits synthesize with a site table twice, it is a usage error."""
    rng = np.random.default_rng(1)
    frames = [pd.DataFrame({"x": rng.normal(size=30), "y": rng.normal(size=30)}) for _ in "ab"]
    paths = []
    for name, frame in zip("ab", frames, strict=True):
        paths.append(tmp_path / f"{name}.csv")
        frame.to_csv(paths[-1], index=False)
    real = tmp_path / "real.csv"
    pd.concat(frames).to_csv(real, index=False)
    out = tmp_path / "r.html"
    done = fits_in_process(
        "report", "--real", real, "--synthetic", real, "--out", out, "--target", "y",
        "--clients", paths[0], paths[1], tmp_path / "." / "a.csv",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "are the same file" in done.stderr and "give each client's table once" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ratio", "nan"], "--ratio values must be >= 0 (inf: all rows), got nan"),
        (["--target", "y", "--target", "y"], "--target ['y'] given more than once"),
    ],
)
def test_fits_report_usage_errors_exit_2(tmp_path: Path, args, message) -> None:
    """--ratio nan slipped past the usage check (nan < 0 is false) and a target named
    twice was caught only by the evaluation: both exited 1, a data error; they are usage
    errors (exit 2), found before any table is read."""
    real = tmp_path / "real.csv"
    pd.DataFrame({"x": np.arange(20.0), "y": np.arange(20.0) % 3}).to_csv(real, index=False)
    done = fits_in_process(
        "report", "--real", real, "--synthetic", real, "--out", tmp_path / "r.html", *args
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and not (tmp_path / "r.html").exists()


def test_a_nominal_column_coded_differently_gets_a_note() -> None:
    """Labels in the real table and numbers in the synthetic one share no value: the
    report said only 'worst: g 0'; a note now names the column and the likely cause."""
    rng = np.random.default_rng(2)
    real = pd.DataFrame({"x": rng.normal(size=60), "g": rng.choice(["a", "b"], 60)})
    synthetic = real.assign(g=real["g"].map({"a": 1, "b": 2}))
    rep = evaluate(real, synthetic, max_rows=60)
    assert any(
        "nominal column(s) ['g']" in n and "none of the real" in n for n in rep.data["notes"]
    )
    assert not any("nominal column" in n for n in evaluate(real, real, max_rows=60).data["notes"])


def test_a_tiny_table_draws_its_page_without_numpy_warnings(tmp_path: Path) -> None:
    """Three rows, the synthetic ones of one class: every parameter error is missing,
    and the figure's nanmin warned
    'All-NaN slice encountered' on the terminal of fits report."""
    import warnings

    rng = np.random.default_rng(3)
    real = pd.DataFrame(
        {"x": rng.normal(size=3), "g": ["a", "b", "c"], "y": [0, 0, 1], "k": [1, 2, 1]}
    )
    synthetic = real.assign(x=rng.normal(size=3), y=0)  # one class: no synthetic model
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        evaluate(real, synthetic, target="y").save(tmp_path / "r.html")
    assert (tmp_path / "r.html").exists()


def test_a_synthetic_table_of_one_class_is_reported_not_refused() -> None:
    """With training rows, a synthetic target of one class stopped the whole report in
    the gradient-boosting comparison; the report is written with a note instead."""
    rng = np.random.default_rng(4)
    real = pd.DataFrame({"x": rng.normal(size=80), "y": rng.integers(0, 2, 80)})
    rep = evaluate(real, real.assign(y=0), target="y", train=real, max_rows=80)
    assert rep.data["boosting"]["y"]["synthetic"]["roc_auc"] is None
    assert any("synthetic table holds only one class of 'y'" in n for n in rep.data["notes"])


def test_a_column_named_like_the_intercept_or_a_level_keeps_its_coefficient() -> None:
    """Columns 'intercept' and 'g=b' (next to the nominal column g) gave two reference
    coefficients one name; the report's JSON kept one of them and dropped the other."""
    rng = np.random.default_rng(5)
    n = 200
    real = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "g": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
            "intercept": rng.normal(size=n),
            "g=b": rng.normal(size=n),
            "y": rng.integers(0, 2, n),
        }
    )
    rep = evaluate(real, real, target="y", train=real, max_rows=n)
    reference = rep.data["utility"]["y"]["reference"]
    assert len(reference) == 1 + 1 + 2 + 1 + 1  # intercept, x, g=b, g=c, two columns
    assert {"intercept", "g=b", "intercept (column)", "g=b (column)"} <= set(reference)


def test_a_client_or_train_table_with_text_in_a_numeric_column_is_named(tmp_path: Path) -> None:
    """Text in a numeric column of --train was reported as 'column x in the independent
    columns table is not numeric', a table the user never gave."""
    rng = np.random.default_rng(6)
    real = pd.DataFrame({"x": rng.normal(size=40), "y": rng.normal(size=40)})
    train = real.assign(x=[f"{v:.2f}z" for v in real["x"]])
    with pytest.raises(ValueError, match=r"'x' is numeric in the real table but not in the train"):
        evaluate(real, real, train=train)


def test_warnings_of_the_inference_check_are_one_line_notes(tmp_path: Path) -> None:
    """A free-text column of the client files made the inference check (FedLSA) warn
    with Python's file path and source line on the terminal of fits report."""
    rng = np.random.default_rng(7)
    paths = []
    frames = []
    for k in range(2):
        n = 150
        frame = pd.DataFrame({"x": rng.normal(size=n), "memo": [f"memo {k} {i}" for i in range(n)]})
        frame["y"] = 2 * frame["x"] + rng.normal(size=n)
        frames.append(frame)
        paths.append(tmp_path / f"site{k}.csv")
        frame.to_csv(paths[-1], index=False)
    real = tmp_path / "real.csv"
    pd.concat(frames).to_csv(real, index=False)
    done = fits_in_process(
        "report", "--real", real, "--synthetic", real, "--out", tmp_path / "r.html",
        "--target", "y", "--clients", *paths, "--no-direct", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note: inference check: column(s) ['memo'] are left out of the model" in done.stderr
    assert "UserWarning" not in done.stderr and ".py:" not in done.stderr


def test_huge_real_values_are_refused_without_numpy_warnings() -> None:
    """Real values of 1e300: the kinds' schema inference also ran rule detection, whose
    moments overflowed into RuntimeWarnings on the terminal before the clear refusal."""
    import warnings

    rng = np.random.default_rng(8)
    real = pd.DataFrame({"x": rng.normal(size=50) * 1e300, "z": rng.normal(size=50)})
    real["w"] = 2 * real["z"] + 1  # an affine rule candidate next to the huge column
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"'x' in the \w+ table holds values beyond"):
            evaluate(real, real)
