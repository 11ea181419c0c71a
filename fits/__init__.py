"""fits: federated synthetic data for mixed-type tables (FITS).

Start with :class:`FITSSynthesizer`; the pieces underneath are the schema
(:mod:`fits.schema`), continualization (:mod:`fits.continualization`), kernels
(:mod:`fits.kernels`), the client (:mod:`fits.client`), the coordinator
(:mod:`fits.coordinator`), the message protocol and transports (:mod:`fits.protocol`,
:mod:`fits.transport`) and the evaluators (:mod:`fits.evaluation`).
"""

from fits.client import FITSClient
from fits.coordinator import Coordinator
from fits.estimate import ConditionalCDF, estimate_conditional_cdf
from fits.kernels import GaussianKernel, KNNKernel
from fits.protocol import Message, ProtocolError
from fits.report import evaluate
from fits.schema import ColumnSpec, Schema, SchemaError
from fits.synthesizer import FITSSynthesizer
from fits.transport import InProcessTransport, Transport

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
