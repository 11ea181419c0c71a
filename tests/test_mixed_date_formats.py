"""A date column written in ISO 8601 at one site and as US text dates at another: the
CSV output writes ISO 8601, as docs/cli.md says for sites that read several formats
(it wrote the US format of the one site whose text was parsed)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from conftest import fits_in_process as run


def test_iso_at_one_site_and_us_dates_at_another_give_iso_output(tmp_path: Path) -> None:
    days = pd.date_range("2020-01-01", periods=60, freq="5D")
    a = pd.DataFrame({"d": days[:30].strftime("%Y-%m-%d"), "x": range(30)})
    b = pd.DataFrame({"d": days[30:].strftime("%m/%d/%Y"), "x": range(30)})
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_csv(tmp_path / "b.csv", index=False)
    out = tmp_path / "o.csv"
    proc = run("synthesize", tmp_path / "a.csv", tmp_path / "b.csv", "--rows", "40",
               "--out", out, "--seed", "0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "dates (%m/%d/%Y, ISO8601)" in proc.stderr
    assert "writes its synthetic dates as ISO 8601" in proc.stderr
    written = pd.read_csv(out, dtype=str)["d"]
    assert written.str.fullmatch(r"\d{4}-\d{2}-\d{2}").all(), written.head()
    # one format at every site: that format, as before
    a.assign(d=days[:30].strftime("%m/%d/%Y")).to_csv(tmp_path / "a.csv", index=False)
    proc = run("synthesize", tmp_path / "a.csv", tmp_path / "b.csv", "--rows", "40",
               "--out", tmp_path / "o2.csv", "--seed", "0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert pd.read_csv(tmp_path / "o2.csv", dtype=str)["d"].str.fullmatch(r"\d\d/\d\d/\d{4}").all()
