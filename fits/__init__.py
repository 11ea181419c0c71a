"""fits: federated synthetic data for mixed-type tables (FITS).

Start with :class:`FITSSynthesizer`; the pieces underneath are the schema
(:mod:`fits.schema`), continualization (:mod:`fits.continualization`), kernels
(:mod:`fits.kernels`), the client (:mod:`fits.client`), the coordinator
(:mod:`fits.coordinator`), the message protocol and transports (:mod:`fits.protocol`,
:mod:`fits.transport`) and the evaluators (:mod:`fits.evaluation`).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fits.client import FITSClient
    from fits.coordinator import Coordinator
    from fits.estimate import ConditionalCDF, estimate_conditional_cdf
    from fits.kernels import GaussianKernel, KNNKernel
    from fits.protocol import Message, ProtocolError
    from fits.report import evaluate
    from fits.schema import ColumnSpec, Schema, SchemaError
    from fits.synthesizer import FITSSynthesizer
    from fits.transport import InProcessTransport, Transport

# Imported on first use, so that a process which needs one part (a Flower site answering
# one message) does not pay for all of them.
_EXPORTS = {
    "FITSClient": "fits.client",
    "Coordinator": "fits.coordinator",
    "ConditionalCDF": "fits.estimate",
    "estimate_conditional_cdf": "fits.estimate",
    "GaussianKernel": "fits.kernels",
    "KNNKernel": "fits.kernels",
    "Message": "fits.protocol",
    "ProtocolError": "fits.protocol",
    "evaluate": "fits.report",
    "ColumnSpec": "fits.schema",
    "Schema": "fits.schema",
    "SchemaError": "fits.schema",
    "FITSSynthesizer": "fits.synthesizer",
    "InProcessTransport": "fits.transport",
    "Transport": "fits.transport",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fits' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "FITSSynthesizer",
    "FITSClient",
    "Coordinator",
    "ConditionalCDF",
    "estimate_conditional_cdf",
    "GaussianKernel",
    "KNNKernel",
    "Message",
    "ProtocolError",
    "ColumnSpec",
    "Schema",
    "SchemaError",
    "InProcessTransport",
    "Transport",
    "evaluate",
    "__version__",
]
