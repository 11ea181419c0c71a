"""Options several ``fits`` commands share."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

__all__ = ["DesignChoice", "DesignOpt"]


class DesignChoice(StrEnum):
    """Local-linear designs (``FITSSynthesizer(design=...)``)."""

    all = "all"
    ordered = "ordered"
    continuous = "continuous"


DesignOpt = Annotated[
    DesignChoice | None,
    typer.Option(
        "--design",
        help="Covariates of the local-linear fit: all (the paper's), ordered (continuous "
        "and ordinal) or continuous; the others only weigh the rows (local-constant in "
        "them; far fewer uploaded bytes on tables with many discrete columns). Default: "
        "the synthesizer's (docs/method.md, 'The local-linear design').",
        show_default=False,
    ),
]
