"""The simulated cluster: a Kubernetes API server, controllers and node agent in one asyncio process."""
