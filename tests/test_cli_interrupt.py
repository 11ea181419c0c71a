"""A Ctrl-C before a ``fits`` command runs (while pandas, scikit-learn and fits load,
the first second of every call) printed Python's traceback of the import under way, and
a SIGTERM then ended it without a word; both now end as a stopped command does
(:mod:`fits.cli`)."""

from __future__ import annotations

import os
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


#: A module that sends its own process SIGTERM as it is imported: the signal comes while
#: the command loads, at a known point, without a sleep that races the child.
_SIGTERM_ON_IMPORT = "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n"


def test_sigterm_while_the_command_loads_ends_as_a_stopped_command(tmp_path):
    """SIGTERM (timeout, docker stop, a scheduler) in the first second of a call ended
    the process without a word; it now says so and exits 143, as a running command does."""
    (tmp_path / "stop_here.py").write_text(_SIGTERM_ON_IMPORT)
    marker = tmp_path / "loaded"
    code = (
        "import fits.cli\nimport stop_here\nimport fits.cli.main\n"
        f"open({str(marker)!r}, 'w').close()"  # not reached
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == "error: interrupted by SIGTERM; nothing was written"
    assert res.returncode == 128 + signal.SIGTERM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stop_here.py"]  # no marker


def test_sigterm_while_loading_ends_even_where_its_exception_would_be_lost(tmp_path):
    """A SystemExit raised in the handler was lost once: SIGTERM landed in the compile of
    a pandas module under import, which cleared the error, and the command went on to
    write its output and exit 0 after printing "nothing was written". Here the import
    under way swallows what the signal raises; the process must still end, with 143."""
    swallow = "import os, signal\ntry:\n    os.kill(os.getpid(), signal.SIGTERM)\n"
    swallow += "except BaseException:\n    pass\n"
    (tmp_path / "swallow.py").write_text(swallow)
    marker = tmp_path / "loaded"
    command = tmp_path / "fits"  # the process is the fits command (its script is __main__)
    command.write_text(f"import fits.cli\nimport swallow\nopen({str(marker)!r}, 'w').close()")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, str(command)], capture_output=True, text=True, timeout=120, env=env
    )
    assert res.stderr.strip() == "error: interrupted by SIGTERM; nothing was written"
    assert res.returncode == 128 + signal.SIGTERM
    assert not marker.exists()


def test_a_sigterm_ignored_by_the_caller_stays_ignored(tmp_path):
    (tmp_path / "stop_here.py").write_text(_SIGTERM_ON_IMPORT)
    code = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "import fits.cli, stop_here"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_a_command_that_handles_its_signals_gives_them_back_to_their_default():
    """Once a command runs, its stop signals are its own (interruptible); after it they
    end the process as before, not as a loading command (whose line would be wrong)."""
    import fits.cli
    from fits.cli.errors import interruptible

    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, fits.cli._stopped_while_loading)
    try:
        with interruptible():
            assert signal.getsignal(signal.SIGTERM) is not fits.cli._stopped_while_loading
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_ctrl_c_inside_a_command_before_it_handles_signals_says_so(tmp_path, monkeypatch):
    """Ctrl-C during a command's own imports and checks (before its ``interruptible``
    block) exited 130 without a word: Typer turns the KeyboardInterrupt into a silent
    exit. It now prints the line every stopped command prints."""
    from typer.testing import CliRunner

    import fits.cli.main as main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(main, "_check_inputs", interrupted)
    site = tmp_path / "a.csv"
    site.write_text("x,y\n1,2\n3,4\n")
    out = tmp_path / "o.csv"
    res = CliRunner().invoke(main.app, ["synthesize", str(site), "--rows", "5", "--out", str(out)])
    assert res.exit_code == 130
    assert "error: interrupted by SIGINT; nothing was written" in res.output
    assert not out.exists()


def test_a_signal_ignored_by_the_caller_stays_ignored_while_a_command_runs():
    """A shell's background job ignores SIGINT, nohup ignores SIGHUP: fits ignored them
    while it loaded, then handled them once a command ran (a SIGINT 3 s in did nothing,
    one 12 s in stopped it). Ignored stays ignored; the others are handled."""
    from fits.cli.errors import interruptible

    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interruptible():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, signal.SIG_DFL)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
