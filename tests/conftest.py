"""Shared fixtures: a mixed-type table with strong dependence, split over clients."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path

#: Under pytest-xdist (``-n auto``) each worker is one of as many processes as there are
#: cores: OpenMP and BLAS pools of one thread per core in every worker oversubscribe the
#: machine (HistGradientBoosting's OpenMP threads spin while they wait: a test took 2.6
#: times as long on 2 cores), so each worker, and every ``fits`` process it starts,
#: keeps to one thread. Set before numpy, scipy and scikit-learn load their pools.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

#: The installed ``fits`` command of the interpreter running the tests (its venv), else
#: the one on PATH.
_HERE = Path(sys.executable).with_name("fits")
FITS = str(_HERE) if _HERE.exists() else (shutil.which("fits") or str(_HERE))


def fits_in_process(
    *args: object, cwd: Path | None = None, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``fits ARGS`` run in this process (typer's CliRunner), answered as ``subprocess.run``
    answers for the installed command: exit code, stdout and stderr apart.

    It spares a test the Python start and the imports of pandas, scikit-learn and fits
    (1.5 to 3 s a command). As in a process of its own, ``sys.argv`` is the command's,
    warnings that reach the top are printed on stderr (with a fresh Python's filters),
    and an exception that escapes the command ends it with exit code 1 and its traceback
    on stderr. ``cwd``: the working folder of the call; ``env``: variables to set for it
    (None removes one). What only a real process shows (the console script, stop
    signals) stays with :data:`FITS` and ``subprocess``.
    """
    from typer.testing import CliRunner

    from fits.cli.main import app

    try:  # click < 8.2 (typer's floor): stderr apart from stdout only when asked
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 and typer's own click: always apart
        runner = CliRunner()
    argv = [str(a) for a in args]
    saved_argv = sys.argv
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.resetwarnings()  # a fresh interpreter's defaults (no -W, no PYTHONWARNINGS)
        warnings.simplefilter("default")
        for hidden in (
            DeprecationWarning,
            PendingDeprecationWarning,
            ImportWarning,
            ResourceWarning,
        ):
            warnings.simplefilter("ignore", hidden)
        sys.argv = [FITS, *argv]
        try:
            res = runner.invoke(app, argv, env=env, prog_name="fits")
        finally:
            sys.argv = saved_argv
    stderr, code = res.stderr, res.exit_code
    for w in caught:
        stderr += warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        stderr += "".join(traceback.format_exception(res.exception))
        code = 1
    return subprocess.CompletedProcess([FITS, *argv], code, res.stdout, stderr)


SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def wait_until(predicate, timeout: float, step: float = 0.1) -> bool:
    """Poll ``predicate`` every ``step`` seconds until it is true or ``timeout`` passed;
    whether it was true at last (processes that end, files that appear)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def marked_processes(marker: str | bytes) -> set[int]:
    """Live processes (not zombies) whose environment holds ``marker``: everything a
    test started with it in the environment, and their children (Linux: /proc)."""
    mark = marker.encode() if isinstance(marker, str) else marker
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark in environ and state != "Z":  # zombies hold nothing
            found.add(int(entry.name))
    return found


def kill_marked(marker: str | bytes) -> None:
    """SIGKILL every :func:`marked_processes` (a test's clean-up, even on failure)."""
    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def mixed_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Binary, continuous, ordinal (unequal gaps), nominal and continuous columns.

    Every column depends strongly on the earlier ones, so a column-wise independent
    resample is far from the joint distribution.
    """
    rng = np.random.default_rng(seed)
    b = rng.random(n) < 0.4
    x = np.where(b, 1.5, -1.0) + rng.normal(size=n)
    latent = 0.9 * x + 0.5 * rng.normal(size=n)
    o = np.select([latent < -1.0, latent < 0.5], [1, 2], 5)  # support {1, 2, 5}
    labels = np.array(["north", "south", "west"])
    c = labels[(np.digitize(x + 0.6 * rng.normal(size=n), [-0.5, 1.0]))]
    y = 2.0 * x - 1.5 * (c == "west") + 0.5 * o + 0.4 * rng.normal(size=n)
    return pd.DataFrame({"b": b, "x": x, "o": o, "c": c, "y": y})


def write_sites(tables: dict[str, pd.DataFrame], folder: Path) -> list[str]:
    """Each site's table written as ``folder/<name>.csv``; the paths, in order."""
    paths = []
    for name, t in tables.items():
        t.to_csv(folder / f"{name}.csv", index=False)
        paths.append(str(folder / f"{name}.csv"))
    return paths


def split(frame: pd.DataFrame, sizes: list[int]) -> list[pd.DataFrame]:
    """Consecutive blocks of the given sizes."""
    out, start = [], 0
    for m in sizes:
        out.append(frame.iloc[start : start + m].reset_index(drop=True))
        start += m
    return out


@pytest.fixture(scope="session")
def mixed_clients() -> list[pd.DataFrame]:
    """Three clients of unequal size (600, 300, 100 rows)."""
    return split(mixed_table(1000, seed=1), [600, 300, 100])


def glm_tables(
    family: str, sizes=(120, 90, 150), seed: int = 3, shift: float = 0.0
) -> list[pd.DataFrame]:
    """Sites for the GLM tests: x1 (its mean moves by ``shift`` per site), x2, a
    three-level c and a linear, logistic or Poisson y of them."""
    rng = np.random.default_rng(seed)
    out = []
    for k, n in enumerate(sizes):
        x1 = rng.normal(shift * k, 1, n)
        x2 = rng.normal(5, 2, n)
        c = rng.choice(["a", "b", "c"], n)
        eta = 0.2 + 0.7 * x1 - 0.3 * (x2 - 5) / 2 + 0.4 * (c == "b")
        if family == "linear":
            y = eta + rng.normal(0, 1, n)
        elif family == "logistic":
            y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
        else:
            y = rng.poisson(np.exp(0.5 * eta))
        out.append(pd.DataFrame({"x1": x1, "x2": x2, "c": c, "y": y}))
    return out
