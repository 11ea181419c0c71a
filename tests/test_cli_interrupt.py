"""A Ctrl-C before a ``fits`` command runs (while pandas, scikit-learn and fits load,
the first second of every call) printed Python's traceback of the import under way;
it now ends as a stopped command does (:mod:`fits.cli`)."""

from __future__ import annotations

import signal
import subprocess
import sys


def test_ctrl_c_while_the_command_loads_prints_no_traceback():
    code = "import fits.cli\nimport fits.cli.main\nraise KeyboardInterrupt"  # as if mid-import
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    assert "error: interrupted by SIGINT" in res.stderr
    assert res.returncode in (-signal.SIGINT, 128 + signal.SIGINT)  # as SIGINT ends a process


def test_other_errors_keep_their_traceback():
    code = "import fits.cli\nraise RuntimeError('boom')"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" in res.stderr and "RuntimeError: boom" in res.stderr
