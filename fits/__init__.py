"""fits: federated synthetic data for mixed-type tables (FITS).

Start with :class:`FITSSynthesizer`.  Underneath, one subpackage per layer (see
``docs/architecture.md``): :mod:`fits.core` (schema, continualization, kernels, CDF
operators), :mod:`fits.federation` (messages, secure aggregation, transport, the site
and the coordinator), :mod:`fits.deploy` (in process, Flower), :mod:`fits.evaluation`
and :mod:`fits.report` (fidelity), :mod:`fits.analysis` (federated model fitting).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fits.core.kernels import GaussianKernel, KNNKernel
    from fits.core.schema import (
        ColumnSpec,
        DataNote,
        IdentifierColumnError,
        Schema,
        SchemaError,
    )
    from fits.estimate import ConditionalCDF, estimate_conditional_cdf
    from fits.federation.client import FITSClient
    from fits.federation.coordinator import Coordinator
    from fits.federation.policy import SitePolicy
    from fits.federation.protocol import Message, ProtocolError
    from fits.federation.transport import InProcessTransport, Transport
    from fits.report import evaluate
    from fits.synthesizer import FITSSynthesizer, NotConnectedError

# Imported on first use, so that a process which needs one part (a Flower site answering
# one message) does not pay for all of them.
_EXPORTS = {
    "FITSClient": "fits.federation.client",
    "Coordinator": "fits.federation.coordinator",
    "SitePolicy": "fits.federation.policy",
    "ConditionalCDF": "fits.estimate",
    "estimate_conditional_cdf": "fits.estimate",
    "GaussianKernel": "fits.core.kernels",
    "KNNKernel": "fits.core.kernels",
    "Message": "fits.federation.protocol",
    "ProtocolError": "fits.federation.protocol",
    "evaluate": "fits.report",
    "ColumnSpec": "fits.core.schema",
    "Schema": "fits.core.schema",
    "SchemaError": "fits.core.schema",
    "DataNote": "fits.core.schema",
    "IdentifierColumnError": "fits.core.schema",
    "FITSSynthesizer": "fits.synthesizer",
    "NotConnectedError": "fits.synthesizer",
    "InProcessTransport": "fits.federation.transport",
    "Transport": "fits.federation.transport",
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
    "SitePolicy",
    "ConditionalCDF",
    "estimate_conditional_cdf",
    "GaussianKernel",
    "KNNKernel",
    "Message",
    "ProtocolError",
    "ColumnSpec",
    "Schema",
    "SchemaError",
    "DataNote",
    "IdentifierColumnError",
    "NotConnectedError",
    "InProcessTransport",
    "Transport",
    "evaluate",
    "__version__",
]
