"""Cost of the release check `fits synthesize` prints (fits.evaluation.copies) on Adult.

The 45,222 Adult rows over the paper's 10 sites; a stand-in synthetic table of 36,177
rows (each column permuted on its own, so no synthesis is needed to time the check).

    python benchmarks/release_check.py
"""

import sys
import time

import numpy as np
import pandas as pd

from fits.datasets import federated_split, load_adult
from fits.evaluation.copies import ReleaseCheck

data = load_adult(sys.argv[1] if len(sys.argv) > 1 else "../shared/datasets")
clients, _ = federated_split(data.frame, test_size=0.0, seed=0)
sites = {f"site {k + 1}": c for k, c in enumerate(clients)}
kinds = dict(data.kinds)
rng = np.random.default_rng(0)
pooled = pd.concat(clients, ignore_index=True)
# a stand-in for a synthetic table: each column permuted on its own (36,177 rows)
syn = pd.DataFrame(
    {c: pooled[c].to_numpy()[rng.permutation(len(pooled))] for c in pooled.columns}
).iloc[:36177]
t0 = time.perf_counter()
check = ReleaseCheck(sites, kinds, max_rows=2000, seed=0)
t1 = time.perf_counter()
for s in range(0, len(syn), 65536):
    check.update(syn.iloc[s : s + 65536])
t2 = time.perf_counter()
r = check.result()
t3 = time.perf_counter()
print(
    f"setup {t1 - t0:.1f} s, exact copies over {len(syn)} rows {t2 - t1:.1f} s, DCR {t3 - t2:.1f} s"
)
print(r.summary())
print(r.warnings)
