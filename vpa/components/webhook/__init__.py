"""The admission controller: the HTTPS webhook that sets pod resources at creation and validates VPAs.

Modules: `controller` (`AdmissionController`, the component, and `run(ctx)`, what the runtime starts: TLS,
the server's lifecycle, registration, the status Lease), `admitter` (one review in, one verdict out),
`server` (the aiohttp application), `caches` (what reviews read from the watch caches), `targets` (pods'
top-most controllers and targets' selectors), `silence` (the API server not calling us), `metrics`, and
`loop_thread` (the event loop the webhook serves from).

Reviews are served from an event loop of their own on a thread of their own (`loop_thread`),
so they never wait behind the recommender's or the watch caches' work on the main loop. What the admission
path reads from the main loop's caches it reads without awaiting (index lookups copy their keys in one
step; merged LimitRanges are kept only when no LimitRange changed meanwhile); its API reads and Events go
back to the main loop, which owns the client.

Slow or stalled clients (`vpa.components.connections`): the TLS handshake must finish within 10 s, the
first request's headers within 10 s more and a body within 10 s of its headers; at most 1,024 connections
at once; others are closed and counted.

Never the reason a pod cannot start: any exception while admitting a pod answers `allowed: true` with no
patch (logged, counted as `status="error"`); a review that cannot be read answers 400, a body over 5 MiB
413 and a non-JSON content type 415 (the API server then applies the failure policy, `Ignore` by default).

Certificates: `--tls-cert-file`/`--tls-private-key` are used when they exist. When neither exists and
`--register-webhook=true` (so we also control the caBundle), the certificates are self-managed: a CA and
an EC P-256 serving certificate for the Service names, shared by all replicas through the Secret
`vpa-webhook-certs` in the Service's namespace and renewed before expiry. Anything else is fatal.

Silence: when pods are created in namespaces with VPAs while no AdmissionReview at all reaches the server
for `silence_check_s` (60 s of wall time), the API server is not calling us (a wrong Service, endpoints
that do not reach this process, a NetworkPolicy, a failure policy of `Ignore` hiding it): one warning
`admission_webhook_not_called` and `vpa_admission_controller_webhook_silent` 1, until a review arrives.

Registration happens as soon as the server listens (upstream sleeps 10 s first) and replaces an existing
configuration in place (upstream deletes and recreates it).

Must not: import other components, make admission decisions itself (that is `vpa.logic`), or do Secret,
file or webhook-configuration I/O itself (that is `vpa.kube.certificates` / `vpa.kube.webhookregistering`).
"""

from vpa.components.webhook.controller import AdmissionController, run

__all__ = ["AdmissionController", "run"]
