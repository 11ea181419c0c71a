"""A column of e-mail addresses is an identifier however often each repeats: refused
unless declared (never copied into synthetic output by default), and its sites never
send its values.  Tiny tables, in process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.core.schema import IdentifierColumnError, describe_table

from conftest import fits_in_process


def _sites(distinct: int, rows: int = 100) -> list[pd.DataFrame]:
    """Two sites whose 'email' column repeats ``distinct`` addresses over ``rows`` rows
    (each address in many rows: no near-unique column, no repeated-id warning)."""
    rng = np.random.default_rng(0)
    people = [f"person{i}@example.org" for i in range(distinct)]
    return [
        pd.DataFrame(
            {
                "email": rng.choice(people, rows),
                "amount": rng.normal(50, 10, rows).round(2),
                "g": rng.choice(["a", "b"], rows),
            }
        )
        for _ in range(2)
    ]


@pytest.mark.parametrize("distinct", [3, 15])
def test_repeated_emails_are_refused_and_never_sent(distinct: int) -> None:
    sites = _sites(distinct)
    description = describe_table(sites[0])
    assert "values" not in description["columns"]["email"]  # no address leaves the site
    assert "example.org" not in str(description)
    with pytest.raises(IdentifierColumnError, match=r"'email'.*e-mail addresses.*--drop email"):
        FITSSynthesizer(seed=0).fit(sites)


def test_declared_an_identifier_the_output_holds_surrogates() -> None:
    sites = _sites(15)
    synth = FITSSynthesizer(seed=0, kinds={"email": "id"}).fit(sites)
    out = synth.sample(40)
    assert out["email"].str.startswith("synthetic-").all()
    real = set(pd.concat(sites)["email"])
    assert not set(out["email"]) & real
    # declared nominal: copied on purpose (the user's choice)
    kept = FITSSynthesizer(seed=0, kinds={"email": "nominal"}).fit(sites).sample(40)
    assert set(kept["email"]) <= real


def test_labels_with_an_at_sign_are_no_emails() -> None:
    frame = pd.DataFrame({"where": ["@home", "@work", "office"] * 10, "x": np.arange(30.0)})
    assert "values" in describe_table(frame)["columns"]["where"]


def test_fits_synthesize_says_what_to_do(tmp_path: Path) -> None:
    paths = []
    for k, frame in enumerate(_sites(15)):
        paths.append(tmp_path / f"s{k}.csv")
        frame.to_csv(paths[-1], index=False)
    res = fits_in_process("synthesize", *paths, "--rows", 10, "--out", tmp_path / "o.csv")
    assert res.returncode == 2, res.stderr
    assert "e-mail addresses" in res.stderr and "--kind email=id" in res.stderr
    assert not (tmp_path / "o.csv").exists()
