"""``--na-values`` / ``na_values=``: texts the user names as missing values, read as
missing in every column (or one, ``COLUMN=TEXT``) by every reader of a user's table --
fits.io.read_table and iter_table, the commands, and a federated site's reader -- so
that in-process and Flower runs read alike.  Tiny tables, in process."""

from __future__ import annotations

import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.core.names import ColumnNameError, format_column_list
from fits.core.schema import DataNote
from fits.io import iter_table, na_value_items, read_table

from conftest import fits_in_process

#: A site file: 'age' with -999 (also written -999.0, -999.00) and 'NA', 'score' with
#: 'NA', 'region' a column of labels with 'NA' (North America) among them.
SITE = (
    "age,score,region\n"
    "34,1.5,EU\n"
    "-999,2.5,NA\n"
    "51,NA,US\n"
    "-999.0,3.25,NA\n"
    "NA,4.0,EU\n"
    "28,-999,US\n"
    "-999.00,5.5,EU\n"
    "45,6.0,NA\n"
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site.csv"
    path.write_text(SITE)
    return path


def _read(path: Path, **kwargs: object) -> tuple[pd.DataFrame, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = read_table(path, **kwargs)  # type: ignore[arg-type]
    return frame, [str(w.message) for w in caught if issubclass(w.category, DataNote)]


def test_without_the_option_na_is_a_label_and_minus_999_a_number(site: Path) -> None:
    frame, notes = _read(site)
    assert (frame["age"] == -999).sum() == 3  # a number like any other
    assert frame["age"].isna().sum() == 1  # 'NA' in a column of numbers: missing
    assert list(frame["region"]).count("NA") == 3  # a label, kept as written
    assert frame["region"].isna().sum() == 0
    # the note names the option that says otherwise
    assert any("'region'" in n and "--na-values NA" in n for n in notes)


def test_with_the_option_every_listed_text_is_missing_in_every_column(site: Path) -> None:
    frame, notes = _read(site, na_values=["NA", "-999"])
    # -999 written -999, -999.0 and -999.00, and 'NA': all missing
    assert frame["age"].isna().sum() == 4
    assert str(frame["age"].dtype) == "Int64"  # whole numbers with blanks, as CSV's
    assert sorted(frame["age"].dropna().tolist()) == [28, 34, 45, 51]
    assert frame["score"].isna().sum() == 2  # 'NA' and -999
    assert frame["region"].isna().sum() == 3  # 'NA' is no label any more
    assert set(frame["region"].dropna()) == {"EU", "US"}
    assert not any("'region'" in n for n in notes)  # nothing kept as written


def test_column_text_applies_to_that_column_only(site: Path) -> None:
    frame, _ = _read(site, na_values=[("score", "-999")])
    assert (frame["age"] == -999).sum() == 3  # not named for age
    assert frame["score"].isna().sum() == 2
    assert list(frame["region"]).count("NA") == 3
    same, _ = _read(site, na_values={"score": ["-999"]})  # pandas' mapping form
    pd.testing.assert_frame_equal(frame, same)
    with pytest.raises(ColumnNameError, match=r"no column \['scor'\] in .*site\.csv"):
        read_table(site, na_values=[("scor", "-999")])


def test_items_of_the_command_line() -> None:
    assert na_value_items(["NA", "-999", "age=-1", " . "]) == ["NA", "-999", ("age", "-1"), "."]
    assert na_value_items(["a=b=c"]) == [("a=b", "c")]  # split at the last '='
    with pytest.raises(ValueError, match="give a text"):
        na_value_items(["age="])


def test_iter_table_reads_as_read_table(site: Path, tmp_path: Path) -> None:
    for na in (None, ["NA", "-999"], [("age", "-999")]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            whole = read_table(site, na_values=na)
            chunks = pd.concat(list(iter_table(site, 3, na_values=na)))
        pd.testing.assert_frame_equal(whole, chunks)


def test_parquet_numbers_texts_and_categories(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pd.DataFrame(
        {
            "i": [1, -999, 3, 4, 5, 6],
            "f": [1.5, np.nan, -999.0, 2.0, 3.0, 4.0],
            "c": pd.Categorical(["a", "NA", "b", "a", "a", "b"]),
            "s": ["x", "-999", "NA", "y", "x", "."],
            "d": [Decimal(v) for v in ("1.50", "-999", "2.25", "-999.00", "3", "4")],
        }
    ).to_parquet(path)
    plain = read_table(path)
    assert (plain["i"] == -999).sum() == 1 and "NA" in plain["c"].cat.categories
    frame = read_table(path, na_values=["NA", "-999", "."])
    assert str(frame["i"].dtype) == "Int64" and frame["i"].isna().sum() == 1
    assert frame["f"].isna().sum() == 2
    assert list(frame["c"].cat.categories) == ["a", "b"] and frame["c"].isna().sum() == 1
    assert frame["s"].isna().sum() == 3
    assert frame["d"].isna().sum() == 2  # a Parquet decimal column's Decimal values
    for rows in (1, 2, 4):
        chunks = pd.concat(list(iter_table(path, rows, na_values=["NA", "-999", "."])))
        pd.testing.assert_frame_equal(frame, chunks)


def _sites(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(3)
    paths = []
    for k in range(2):
        n = 60
        age = rng.integers(20, 70, n).astype(object)
        age[rng.random(n) < 0.2] = -999
        region = rng.choice(["EU", "US", "NA"], n)
        score = np.round(rng.normal(50, 10, n), 1).astype(object)
        score[rng.random(n) < 0.15] = "NA"
        paths.append(tmp_path / f"s{k}.csv")
        pd.DataFrame({"age": age, "score": score, "region": region}).to_csv(paths[-1], index=False)
    return paths


def test_fits_synthesize_reads_the_codes_as_missing_and_writes_empty_fields(
    tmp_path: Path,
) -> None:
    paths = _sites(tmp_path)
    plain = fits_in_process("synthesize", *paths, "--rows", 200, "--out", tmp_path / "a.csv")
    assert plain.returncode == 0, plain.stderr
    out = pd.read_csv(tmp_path / "a.csv", keep_default_na=False, dtype=str)
    assert "NA" in set(out["region"])  # the label, drawn as written
    named = fits_in_process(
        "synthesize",
        *paths,
        "--rows",
        200,
        "--out",
        tmp_path / "b.csv",
        "--na-values",
        "NA",
        "--na-values",
        "-999",
    )
    assert named.returncode == 0, named.stderr
    out = pd.read_csv(tmp_path / "b.csv", keep_default_na=False, dtype=str)
    assert "NA" not in set(out["region"]) and "" in set(out["region"])  # empty fields
    ages = pd.to_numeric(out["age"].replace("", np.nan))
    assert ages.min() >= 20 and ages.isna().any()  # no -999 drawn; missing: empty
    assert "" in set(out["score"]) and "NA" not in set(out["score"])


def test_the_commands_refuse_a_column_text_of_no_column(tmp_path: Path) -> None:
    paths = _sites(tmp_path)
    res = fits_in_process(
        "schema", *paths, "--out", tmp_path / "s.json", "--na-values", "agee=-999"
    )
    assert res.returncode == 2, res.stderr
    assert "agee" in res.stderr and "did you mean 'age'" in res.stderr
    res = fits_in_process("schema", *paths, "--out", tmp_path / "s.json", "--na-values", "age=")
    assert res.returncode == 2 and "give a text" in res.stderr


def test_a_federated_site_reads_as_fits_synthesize(tmp_path: Path) -> None:
    """The run config's and the node config's na-values reach the site's reader (the
    ClientApp's, in process), which reads its file as fits synthesize reads it."""
    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    from fits.cli.federate import _run_config
    from fits.cli.main import _load_sites
    from fits.deploy.flower import read_run_config, site_table

    paths = _sites(tmp_path)
    items = ["NA", "age=-999"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = _load_sites(paths, None, None, 0, True, na_value_items(items))
        config = _run_config(
            tmp_path / "o.csv", 10, 0, [], "", None, 60.0, 2, None, na_values=items
        )
        assert read_run_config(config)["na_values"] == ["NA", ("age", "-999")]
        for path in paths:
            by_run, _ = site_table({"data-path": str(path)}, config)
            pd.testing.assert_frame_equal(by_run, local[path.stem])
            # the site's own (fits federate site --na-values): node config
            by_node, _ = site_table(
                {"data-path": str(path), "na-values": format_column_list(items)}
            )
            pd.testing.assert_frame_equal(by_node, local[path.stem])
            plain, _ = site_table({"data-path": str(path)}, {})
            assert not plain.equals(by_run)
    assert local["s0"]["age"].isna().any() and (local["s0"]["region"] != "NA").all()


def test_numbers_with_too_many_codes_say_to_name_them(tmp_path: Path) -> None:
    """A column of numbers with more '-', '?' and '.' than the 5% the text-number
    parser reads as markers stays text and is refused as near-unique: the message
    says it is mostly numbers and names --na-values; with the codes named it is
    numbers."""
    from fits.core.schema import IdentifierColumnError, Schema

    rng = np.random.default_rng(1)
    values = rng.normal(40, 5, 50).round(1).astype(object)
    values[:2], values[2:4], values[4] = "-", "?", "."
    path = tmp_path / "b.csv"
    pd.DataFrame({"v": values, "g": rng.choice(["a", "b"], 50)}).to_csv(path, index=False)
    with pytest.raises(
        IdentifierColumnError, match=r"45 of them numbers; mostly numbers.*--na-values"
    ):
        Schema.detect([read_table(path)])
    named = read_table(path, na_values=["-", "?", "."])
    assert Schema.detect([named]).kinds()["v"] == "continuous"


def test_fits_analyze_reads_the_codes_as_missing(tmp_path: Path) -> None:
    import json

    rng = np.random.default_rng(0)
    paths = []
    for k in range(2):
        x = rng.normal(size=40).round(3)
        y = (2 * x + rng.normal(size=40)).round(3).astype(object)
        y[:3] = -999
        paths.append(tmp_path / f"s{k}.csv")
        pd.DataFrame({"x": x, "y": y}).to_csv(paths[-1], index=False)
    common = ["--target", "y", "--family", "linear", "--missing", "drop"]
    for na, rows in (([], 80), (["--na-values", "-999"], 74)):
        out = tmp_path / f"r{len(na)}.json"
        res = fits_in_process("analyze", *paths, *common, "--out", out, *na)
        assert res.returncode == 0, res.stderr
        assert json.loads(out.read_text())["n_obs"] == rows


def test_fits_report_reads_each_table_with_them(tmp_path: Path) -> None:
    """The real tables resolve COLUMN=TEXT strictly; the synthetic table, which lacks
    the columns the synthesis dropped, passes a pair of a column it lacks over."""
    from fits.cli.report import UsageError
    from fits.cli.report import read_table as report_read

    real, synthetic = tmp_path / "real.csv", tmp_path / "syn.csv"
    real.write_text("age,uid\n-999,a\n30,b\n")
    synthetic.write_text("uid\nsynthetic-000001\n")
    pairs = [("age", "-999")]
    assert report_read(real, "--real", pairs)["age"].isna().sum() == 1
    assert len(report_read(synthetic, "--synthetic", pairs, lenient=True)) == 1
    with pytest.raises(UsageError, match="no column"):
        report_read(synthetic, "--real", pairs)


def test_a_code_written_with_a_decimal_comma(tmp_path: Path) -> None:
    """';'-separated with a decimal comma: '-999,0' is the code -999 too, and a column
    whose other values are whole numbers comes back as integers, as without it."""
    path = tmp_path / "semi.csv"
    path.write_text("a;b\n1,5;-999\n2,5;-999,0\n3,25;7\n-999,00;8\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = read_table(path, na_values=["-999"])
        chunks = pd.concat(list(iter_table(path, 2, na_values=["-999"])))
    assert frame["a"].isna().sum() == 1 and frame["b"].isna().sum() == 2
    assert str(frame["b"].dtype) == "Int64" and frame["b"].dropna().tolist() == [7, 8]
    pd.testing.assert_frame_equal(frame, chunks)


def test_fits_federate_site_gives_its_node_config_the_texts(tmp_path: Path, monkeypatch) -> None:
    """fits federate site --na-values: checked against this site's table (an unknown
    column: exit 2 before Flower starts) and written into the SuperNode's node config,
    which Flower's parser of --node-config hands the site as given."""
    pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")
    from types import SimpleNamespace

    from flwr.common.config import parse_config_args

    from fits.cli import federate
    from fits.deploy.flower import site_na_values
    from fits.deploy.flower_launch import supernode_command

    data = _sites(tmp_path)[0]
    given: dict = {}

    def command(superlink, path, **options):
        given.update(options)
        return ["flower-supernode"]

    launch = SimpleNamespace(FederationError=RuntimeError, supernode_command=command)
    monkeypatch.setattr(federate, "_launch", lambda: launch)
    monkeypatch.setattr(federate, "_port_problem", lambda host, port: None)
    monkeypatch.setattr(federate, "_exec", lambda cmd, home: None)
    site = ["federate", "site", "--data", data, "--superlink", "x:1", "--insecure"]
    res = fits_in_process(*site, "--na-values", "agee=-999")
    assert res.returncode == 2 and not given and "agee" in res.stderr
    res = fits_in_process(
        *site, "--na-values", "NA", "--na-values", "a,b", "--na-values", "age=-999"
    )
    assert res.returncode == 0, res.stderr
    assert given["na_values"] == ["NA", "a,b", "age=-999"]
    cmd = supernode_command("127.0.0.1:9093", data, insecure=True, na_values=given["na_values"])
    config = parse_config_args([cmd[cmd.index("--node-config") + 1]])
    assert site_na_values(config) == ["NA", "a,b", ("age", "-999")]
