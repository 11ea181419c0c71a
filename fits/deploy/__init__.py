"""Ways to run a federation; each gives the same output for the same seed.

- :mod:`fits.deploy.inprocess`: every site in this process (:func:`build_federation`
  over :class:`~fits.federation.transport.InProcessTransport`);
- :mod:`fits.deploy.flower`: the Flower ServerApp/ClientApp over the same coordinator
  and client (needs ``fits[flower]``);
- :mod:`fits.deploy.flower_launch`: starting SuperLink, SuperNodes and runs
  (``fits federate``);
- :mod:`fits.deploy.flower_worker`: a site's warm ClientApp process, which answers all
  its SuperNode's messages instead of a new process per message.
"""

from fits._lazy import lazy_exports

_EXPORTS = {
    "build_federation": "fits.deploy.inprocess",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
