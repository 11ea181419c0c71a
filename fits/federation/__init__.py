"""Everything that defines what crosses the wire between the sites and the coordinator.

- :mod:`fits.federation.protocol`: the messages (:class:`Message`) and their checks;
- :mod:`fits.federation.secure`: secure aggregation (pairwise masks over fixed point);
- :mod:`fits.federation.transport`: the :class:`Transport` interface the coordinator
  talks through;
- :mod:`fits.federation.policy`: what a site agrees to answer (:class:`SitePolicy`);
- :mod:`fits.federation.client`: the site side (:class:`FITSClient`), which holds the rows;
- :mod:`fits.federation.coordinator`: the coordinator (:class:`Coordinator`), the paper's
  Algorithms 1 and 2, which holds none.
"""

from fits._lazy import lazy_exports

_EXPORTS = {
    "Message": "fits.federation.protocol",
    "ProtocolError": "fits.federation.protocol",
    "SecureAggregator": "fits.federation.secure",
    "SitePolicy": "fits.federation.policy",
    "PolicyError": "fits.federation.policy",
    "ClientError": "fits.federation.transport",
    "Transport": "fits.federation.transport",
    "FITSClient": "fits.federation.client",
    "Coordinator": "fits.federation.coordinator",
    "SecureAggregationError": "fits.federation.coordinator",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
