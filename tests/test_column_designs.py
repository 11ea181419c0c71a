"""Per-column designs (``column_designs``) and the local-constant design ``"constant"``.

The local-constant fit's equality with the pooled estimator is checked against an
independent oracle in ``test_equivalence.py`` (``test_continuous_design_equals_pooled``,
design ``"constant"``); here: that a column's override reaches that column only, that
wrong names and values are refused with messages that say what to do, and the CLI.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pandas as pd
import pytest

from fits import FITSSynthesizer
from fits.federation.protocol import DESIGNS

from conftest import fits_in_process, mixed_table, split

KINDS = {"b": "nominal", "x": "continuous", "o": "ordinal", "c": "nominal", "y": "continuous"}


@pytest.fixture(scope="module")
def clients() -> list[pd.DataFrame]:
    return split(mixed_table(900, seed=7), [450, 300, 150])


def _fit(clients, **kw) -> FITSSynthesizer:
    return FITSSynthesizer("knn", seed=3, kinds=KINDS, **kw).fit(clients)


def test_constant_is_a_design() -> None:
    assert "constant" in DESIGNS


def test_override_reaches_its_column_only(clients) -> None:
    """``column_designs={"y": "constant"}``: y's design has no covariate, every other
    column keeps the default's; the columns drawn before y are the default's bit for bit
    (the draws of a column do not depend on a later column's design) and y is not."""
    default = _fit(clients)
    override = _fit(clients, column_designs={"y": "constant"})
    coord, base = override.coordinator, default.coordinator
    assert coord.design_covariates("y").size == 0
    assert base.design_covariates("y").size > 0
    for column in ("b", "x", "o", "c"):
        np.testing.assert_array_equal(
            coord.design_covariates(column), base.design_covariates(column)
        )
    a, b = default.sample(400), override.sample(400)
    pd.testing.assert_frame_equal(a[["b", "x", "o", "c"]], b[["b", "x", "o", "c"]])
    assert not np.array_equal(a["y"].to_numpy(), b["y"].to_numpy())


def test_override_with_every_column_equals_the_global_design(clients) -> None:
    """Naming every drawn column with one design is that design, bit for bit."""
    every = {c: "constant" for c in ("x", "o", "c", "y")}
    a = _fit(clients, design="constant").sample(300)
    b = _fit(clients, design="all", column_designs=every).sample(300)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_constant_design_answers_in_one_round(clients) -> None:
    """The local-constant design's Hessian is S_00 alone (p = 1): adding the coefficient
    step to the Hessian's message costs nothing, so every column is asked in one
    ``block`` round, whose replies hold one value of S and one row of T per query."""
    synth = FITSSynthesizer("knn", seed=1, kinds=KINDS, design="constant").fit(clients)
    seen: list[tuple[str, dict[str, tuple[int, ...]]]] = []
    synth.coordinator.transport.observers.append(
        lambda k, req, rep: seen.append((req.type, {n: a.shape for n, a in rep.arrays.items()}))
    )
    synth.sample(50)
    types = {t for t, _ in seen}
    assert "block" in types and not types & {"hessian", "cdf"}
    for t, shapes in seen:
        if t == "block":
            assert shapes["S_diag"][1:] == (1,) and shapes["T_fixed"][1] == 1


def test_unknown_column_and_design_are_refused(clients) -> None:
    with pytest.raises(ValueError, match=r"column_designs names \['z'\].*chain: b, x"):
        _fit(clients, column_designs={"z": "constant"})
    with pytest.raises(ValueError, match="'b' is drawn from its marginal"):
        _fit(clients, column_designs={"b": "constant"})
    with pytest.raises(ValueError, match=r"column_designs\['y'\] must be one of"):
        _fit(clients, column_designs={"y": "linear"})
    with pytest.raises(ValueError, match="design must be one of"):
        _fit(clients, design="linear")


def test_design_of_a_column_the_chain_does_not_draw_is_refused(clients) -> None:
    """A design has no effect on the chain's first drawn column (an identifier before
    it is no chain column) nor on a column an affine rule sets: both are refused, as
    for ``column_models``, instead of being accepted and ignored."""
    with_id = [t.assign(uid=[f"u{i}-{j}" for j in range(len(t))]) for i, t in enumerate(clients)]
    with_id = [t[["uid", *KINDS]] for t in with_id]
    kinds = {**KINDS, "uid": "id"}
    with pytest.raises(ValueError, match=r"column_designs\['b'\].*the chain's first column"):
        FITSSynthesizer("knn", seed=3, kinds=kinds, column_designs={"b": "constant"}).fit(with_id)
    # the identifier itself (first in the table): refused as an identifier, not as a
    # column "drawn from its marginal"
    for option in ("column_designs", "column_models"):
        value = "constant" if option == "column_designs" else "boosting"
        with pytest.raises(ValueError, match=rf"{option}\['uid'\].*'uid' is an identifier"):
            FITSSynthesizer("knn", seed=3, kinds=kinds, **{option: {"uid": value}}).fit(with_id)
    ruled = [t.assign(f=2.0 * t["x"] + 1.0) for t in clients]
    with pytest.raises(ValueError, match=r"column_designs\['f'\].*set by the schema's rule"):
        _fit(ruled, column_designs={"f": "constant"})
    _fit(ruled, column_designs={"f": "constant"}, rules=False)  # drawn by the chain: fine


def _run(*args: str) -> subprocess.CompletedProcess:
    """``fits ARGS`` in this process: the installed command's exit code, stdout and stderr."""
    return fits_in_process(*args)


def test_cli_column_design(clients, tmp_path) -> None:
    """``fits synthesize --column-design y=constant`` is the Python API's table; bad
    items and unknown columns are usage errors (exit 2) that leave no output."""
    paths = []
    for i, table in enumerate(clients):
        paths.append(tmp_path / f"site{i}.csv")
        table.to_csv(paths[-1], index=False)
    kinds = [a for c, k in KINDS.items() for a in ("--kind", f"{c}={k}")]
    out = tmp_path / "out.csv"
    res = _run("synthesize", *map(str, paths), "--rows", "200", "--out", str(out), "-q",
               "--seed", "3", *kinds, "--column-design", "y=constant")  # fmt: skip
    assert res.returncode == 0, res.stderr
    plain = tmp_path / "plain.csv"
    res = _run("synthesize", *map(str, paths), "--rows", "200", "--out", str(plain), "-q",
               "--seed", "3", *kinds)  # fmt: skip
    assert res.returncode == 0, res.stderr
    got, base = pd.read_csv(out), pd.read_csv(plain)
    pd.testing.assert_frame_equal(got[["b", "x", "o", "c"]], base[["b", "x", "o", "c"]])
    assert not got["y"].equals(base["y"])
    for item, says in [
        ("y", "write COLUMN=DESIGN"),
        ("y=linear", "must be one of all, ordered, continuous, constant"),
        ("nope=constant", "no column ['nope']"),
        ("b=constant", "'b' is the first column of the chain"),
    ]:
        bad = tmp_path / "bad.csv"
        res = _run("synthesize", *map(str, paths), "--rows", "20", "--out", str(bad), "-q",
                   "--column-design", item)  # fmt: skip
        assert res.returncode == 2, (item, res.stderr)
        assert says in res.stderr and "Traceback" not in res.stderr
        assert not bad.exists()


def test_cli_column_design_after_an_identifier(clients, tmp_path) -> None:
    """``--kind uid=id`` takes the identifier out of the chain: a design for it, or for
    the column after it (now the chain's first), is a usage error that says so."""
    paths = []
    for i, table in enumerate(clients):
        paths.append(tmp_path / f"site{i}.csv")
        table.assign(uid=[f"u{i}-{j}" for j in range(len(table))])[["uid", *KINDS]].to_csv(
            paths[-1], index=False
        )
    for item, says in [
        ("uid=constant", "'uid' is an identifier (kind id), not modelled"),
        ("b=constant", "'b' is the first column of the chain"),
    ]:
        bad = tmp_path / "bad.csv"
        res = _run("synthesize", *map(str, paths), "--rows", "20", "--out", str(bad), "-q",
                   "--kind", "uid=id", "--column-design", item)  # fmt: skip
        assert res.returncode == 2, (item, res.stderr)
        assert says in res.stderr and "Traceback" not in res.stderr
        assert not bad.exists()


def test_federate_run_config_carries_column_designs(tmp_path) -> None:
    """``fits federate run/local --column-design`` put a JSON object in the run config
    (``column-designs``; test_flower.py runs one); a bad item is a usage error."""
    import typer

    from fits.cli.federate import _run_config

    args = (tmp_path / "o.csv", 10, 0, [], "", None, 60.0, 2, None)
    config = _run_config(*args, column_design=["y=constant", "x=all"])
    assert json.loads(config["column-designs"]) == {"y": "constant", "x": "all"}
    assert _run_config(*args)["column-designs"] == ""
    with pytest.raises(typer.Exit) as info:
        _run_config(*args, column_design=["y:constant"])
    assert info.value.exit_code == 2
