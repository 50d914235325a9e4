"""vpa: a Vertical Pod Autoscaler for Kubernetes in one asyncio process.

The package is layered (see docs/architecture.md): `model` (pure data) < `logic` (pure decisions) and
`kube` (I/O adapters) < `components` (loops and servers) < `app` (composition root) < `cli`.
`sim` is the simulated cluster and depends only on `model`.
"""

__version__ = "0.1.0"
