"""The ``fits`` command line (installed as ``fits.cli``)."""
