"""``fits federate local --na-values`` on a real (local) Flower federation writes the
table ``fits synthesize --na-values`` writes: the sites read their files alike (run
config ``na-values``), and booleans keep the files' spelling (``true``/``false``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr", reason="needs the flower extra: pip install 'fits[flower]'")


@pytest.mark.flower
@pytest.mark.slow  # about 80 s of Flower start and rounds
def test_fits_federate_local_reads_and_writes_as_fits_synthesize(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    files = []
    for name in ("a", "b"):
        n = 60
        age = rng.integers(20, 70, n).astype(object)
        age[rng.random(n) < 0.2] = -999
        frame = pd.DataFrame(
            {
                "age": age,
                "region": rng.choice(["EU", "US", "NA"], n),
                "flag": rng.choice(["true", "false"], n),
            }
        )
        files.append(tmp_path / f"{name}.csv")
        frame.to_csv(files[-1], index=False)
    fits = Path(sys.executable).with_name("fits")
    outputs = {}
    for command in (["federate", "local"], ["synthesize"]):
        out = tmp_path / f"{command[-1]}.csv"
        res = subprocess.run(
            [str(fits), *command, *map(str, files), "--na-values", "NA",
             "--na-values", "age=-999", "--rows", "60", "--seed", "2", "--out", str(out)],
            capture_output=True, text=True, timeout=400, check=False,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        outputs[command[-1]] = out.read_bytes()
    assert outputs["local"] == outputs["synthesize"]
    table = pd.read_csv(tmp_path / "synthesize.csv", dtype=str, keep_default_na=False)
    assert "NA" not in set(table["region"]) and "-999" not in set(table["age"])
    assert set(table["flag"]) <= {"true", "false"}
