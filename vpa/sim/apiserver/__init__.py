"""The simulated Kubernetes API server: store, REST/HTTP surface, admission, faults, TLS and `SimCluster`.

Owns: everything a client (kubectl, kubernetes-asyncio, the autoscaler) sees of the simulated cluster's API.
Must not: import the autoscaler (vpa.logic/kube/components/app/cli) or implement kind behaviour such as
scheduling or resizing (that is `vpa.sim.cluster`, plugged in through hooks).
"""
