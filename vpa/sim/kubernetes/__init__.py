"""`vpa sim --control-plane=kubernetes`: the simulated cluster's kubelet and metrics on a real control plane.

Owns: `ControlPlane` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler as child processes) and
`RealCluster`, which starts it and drives it with the same node agent and usage profiles `vpa sim` uses,
through `RemoteStore` (the `vpa.sim.contracts.Store` seam over HTTPS) and a metrics.k8s.io server
registered as an APIService.

Must not: import the autoscaler, or hold a second copy of kubelet behaviour (that lives in `vpa.sim.cluster`).
"""
