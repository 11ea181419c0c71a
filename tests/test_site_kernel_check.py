"""A site refuses, at configure, its own kernel settings that would do nothing given
the run's schema (:func:`fits.core.kernels.check_kernel_settings`): the check
``FITSSynthesizer`` runs on its kernels before the configure round, which the sites of
a Flower run (whose kernels the coordinator never sees) now run themselves."""

from __future__ import annotations

import pandas as pd
import pytest

from fits import FITSSynthesizer, GaussianKernel, KNNKernel
from fits.core.kernels import check_kernel_settings
from fits.core.schema import Schema
from fits.deploy.inprocess import build_federation
from fits.federation.coordinator import Coordinator
from fits.federation.policy import PolicyError

from conftest import mixed_table, split

#: A bad kernel setting, and what the refusal says about it.
BAD = [
    (
        KNNKernel(column_penalties={"x": 2.0}),
        "column_penalties['x']: 'x' is a continuous column",
        "node config column-penalties",
    ),
    (
        KNNKernel(column_penalties={"zz": 2.0}),
        "column_penalties['zz']: 'zz' is no column",
        "node config column-penalties",
    ),
    (
        KNNKernel(column_penalties={"c": 3.0}),
        "'c' is nominal, so its penalty (gamma_q) must lie in (0, 1]",
        "node config column-penalties",
    ),
    (
        GaussianKernel(relevance={"b": {"x": 2.0}}),
        "relevance['b']: 'b' is the chain's first column",
        "node config relevance",
    ),
    (
        KNNKernel(relevance={"x": {"y": 2.0}}),
        "relevance['x']: ['y'] are not columns before 'x' in the chain",
        "node config relevance",
    ),
    (
        KNNKernel(relevance={"y": {"b": 0.0, "x": 0.0, "o": 0.0, "c": 0.0}}),
        "relevance['y']: every covariate of 'y' has weight 0",
        "node config relevance",
    ),
    (
        KNNKernel(relevance={"y": {"pid": 2.0}}),
        "relevance['y']: ['pid'] are not drawn (identifiers, or set by the schema's affine",
        "node config relevance",
    ),
    (
        KNNKernel(column_penalties={"pid": 0.5}),
        "column_penalties['pid']: 'pid' is not drawn (an identifier, or set by",
        "node config column-penalties",
    ),
]


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    """Two sites; ``pid`` an identifier (not drawn)."""
    frames = split(mixed_table(600, seed=4), [350, 250])
    return {
        f"site-{k}": t.assign(pid=[f"s{k}-{i}" for i in range(len(t))])
        for k, t in enumerate(frames, start=1)
    }


def _configure(tables, kernels, audit=None):
    clients, transport = build_federation(tables, kernels, audit=audit)
    coordinator = Coordinator(transport)
    try:
        coordinator.setup(kinds={"pid": "id"})
        coordinator.configure(0)
        coordinator.marginal_cdf(coordinator.schema.order[0])  # the first round after it
    finally:
        transport.close()
    return clients


@pytest.mark.parametrize(("kernel", "says", "fix"), BAD)
def test_a_site_refuses_its_own_kernel_settings_that_do_nothing(tables, kernel, says, fix):
    """Only the site whose kernel has the setting refuses, naming itself, the setting
    and where to change it; the other site's kernel is the default."""
    with pytest.raises(PolicyError) as caught:
        _configure(tables, {"site-1": "knn", "site-2": kernel})
    text = str(caught.value)
    assert text.startswith("site-2 refused the configuration: its kernel's "), text
    assert says in text and fix in text


def test_the_refusal_is_in_the_sites_audit_log(tables):
    entries: list[dict] = []
    kernel = KNNKernel(column_penalties={"x": 2.0})
    with pytest.raises(PolicyError):
        _configure(tables, {"site-1": kernel, "site-2": "knn"}, audit=entries.append)
    refused = [e for e in entries if e["outcome"] == "refused"]
    assert [(e["site"], e["type"]) for e in refused] == [("site-1", "configure")]
    assert "column_penalties['x']" in refused[0]["reason"]


def test_what_a_site_cannot_know_is_left_to_the_coordinator(tables):
    """A site is not told which columns are boosted or set by a sum rule: a site with
    weights for a boosted response answers; FITSSynthesizer (which holds the kernels)
    refuses them, and a Flower run's coordinator never sees them (docs/federation.md)."""
    kernel = KNNKernel(relevance={"y": {"x": 2.0}})
    _configure(tables, {"site-1": kernel, "site-2": "knn"})  # no refusal
    synth = FITSSynthesizer(
        {"site-1": kernel, "site-2": "knn"}, kinds={"pid": "id"}, column_models={"y": "boosting"}
    )
    with pytest.raises(ValueError, match=r"site-1's kernel: relevance\['y'\]: 'y' is drawn from"):
        synth.fit(tables)


@pytest.mark.parametrize(("kernel", "says", "fix"), BAD[:6])
def test_fit_with_per_site_kernels_names_the_site(tables, kernel, says, fix):
    """FITSSynthesizer checks its kernels before the configure round, as before
    (ValueError, fits synthesize's message); with one kernel per site (a list or a
    mapping), the message starts with the site's name."""
    for kernels in ([GaussianKernel(), kernel], {"site-1": "gaussian", "site-2": kernel}):
        synth = FITSSynthesizer(kernels, kinds={"pid": "id"}, seed=0)
        with pytest.raises(ValueError) as caught:
            synth.fit(tables)
        assert str(caught.value).startswith("site-2's kernel: "), caught.value
        assert says in str(caught.value)
        assert not hasattr(synth, "schema_")
    with pytest.raises(ValueError) as caught:  # one kernel for every site: as before
        FITSSynthesizer(kernel, kinds={"pid": "id"}, seed=0).fit(tables)
    assert str(caught.value).startswith(("column_penalties[", "relevance[")), caught.value


def test_fit_on_a_transport_reports_the_sites_refusal(tables):
    """With the sites behind a transport, FITSSynthesizer does not hold their kernels:
    the site's refusal is the error."""
    _, transport = build_federation(
        tables, {"site-1": "knn", "site-2": KNNKernel(relevance={"b": {"x": 1.5}})}
    )
    try:
        with pytest.raises(PolicyError, match=r"site-2 refused the configuration: its kernel's"):
            FITSSynthesizer(kinds={"pid": "id"}).fit(transport)
    finally:
        transport.close()


def test_identifiers_as_the_synthesizer_sees_them():
    """With the merged schema (its kinds), the messages say what the column is."""
    table = pd.DataFrame(
        {"a": [1, 2, 3] * 40, "pid": [f"p{i}" for i in range(120)], "y": [0.5, 1.5, 0.1] * 40}
    )
    schema = Schema.detect([table], kinds={"pid": "id"})
    with pytest.raises(ValueError, match=r"'pid' is an id column; a penalty is for"):
        check_kernel_settings(KNNKernel(column_penalties={"pid": 1.0}), schema)
    with pytest.raises(ValueError, match=r"\['pid'\] are identifiers"):
        check_kernel_settings(KNNKernel(relevance={"y": {"pid": 0.5}}), schema)
    check_kernel_settings(KNNKernel(column_penalties={"a": 1.0}, relevance={"y": {"a": 2}}), schema)
