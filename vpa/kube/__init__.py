"""I/O adapters to the Kubernetes API: client, watch caches, leases, writers, actuators.

Raw API dicts live only here (and in `vpa.sim`); everything handed upwards is a model object.
"""
