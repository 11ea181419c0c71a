"""Federated model fitting and inference on the same federation layer as synthesis.

Empty for now: federated M-estimation with differential privacy and FedLSA with the
online multiplier bootstrap land here.
"""
