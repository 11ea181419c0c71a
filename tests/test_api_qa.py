"""The Python API on inputs a new user hands it: sites as a generator, a refit that
fails, a table too large for memory, bytes columns, hand-edited schemas."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from fits import FITSSynthesizer
from fits.core.schema import SchemaError


def _site(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.normal(50_000, 10_000, n).round(2),
            "color": rng.choice(["red", "green", "blue"], n),
        }
    )


@pytest.fixture(scope="module")
def sites() -> list[pd.DataFrame]:
    return [_site(80, 1), _site(60, 2)]


def _fits_threads() -> int:
    return sum(t.name.startswith("fits-client") for t in threading.enumerate())


def test_sites_given_as_a_generator(sites):
    synth = FITSSynthesizer(seed=0).fit(s for s in sites)
    again = FITSSynthesizer(seed=0).fit(sites)
    pd.testing.assert_frame_equal(synth.sample(20), again.sample(20))
    assert synth.client_names_ == ["client 1", "client 2"]


def test_a_failed_refit_leaves_no_fit_and_no_threads(sites):
    before = _fits_threads()
    synth = FITSSynthesizer(seed=0).fit(sites)
    synth.sample(5)
    bad = sites[1].assign(age=sites[1]["age"].astype(str) + "x")
    with pytest.raises(SchemaError, match="'age'"):
        synth.fit([sites[0], bad])
    # not "reconnect it" (the message for a loaded synthesizer), and not the old fit
    with pytest.raises(NotFittedError):
        synth.sample(5)
    assert not hasattr(synth, "schema_")
    assert _fits_threads() == before


def test_a_failed_setup_ends_the_sites_threads(sites):
    before = _fits_threads()
    synth = FITSSynthesizer(seed=0, kinds={"color": "continuous"})
    with pytest.raises(SchemaError, match="'color'"):
        synth.fit(sites)
    assert _fits_threads() == before


def test_a_table_too_large_for_memory_is_refused_before_drawing(sites, monkeypatch):
    import fits.synthesizer as module

    assert module._physical_memory() > 2**20  # this machine's, read from the system
    synth = FITSSynthesizer(seed=0).fit(sites)
    # 10**12 rows drew for hours before failing; here a machine of 10 kB and 1000 rows
    monkeypatch.setattr(module, "_physical_memory", lambda: 10_000)
    with pytest.raises(ValueError, match="sample_to_file") as info:
        synth.sample(1000)
    assert "1000 rows x 3 columns" in str(info.value)
    assert synth.sample(100).shape == (100, 3)  # what fits is drawn
    assert sum(len(c) for c in synth.iter_sample(1000, chunk_rows=400)) == 1000  # streamed


@pytest.mark.parametrize("values", [[b"ab", b"cd"], ["ab", b"cd"]], ids=["bytes", "mixed"])
def test_bytes_columns_are_refused_naming_site_column_and_fix(sites, values):
    tables = [s.assign(raw=values * (len(s) // 2)) for s in sites]
    with pytest.raises(SchemaError, match=r"client 1: column 'raw' holds bytes.*decode"):
        FITSSynthesizer(seed=0).fit(tables)
