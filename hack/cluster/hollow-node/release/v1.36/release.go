// Package release holds the parts of a hollow node whose Go API differs between Kubernetes releases:
// kubemark's fake cadvisor with the node's machine size, the client of the fake CRI runtime, and the kubelet's
// settings and host fakes (kubelet.go: kubemark's own, which this release still ships). This is
// the 1.36 one (MachineInfo takes no logger, cadvisor's types live in its info/v1 package, and the runtime
// client has one constructor). Each release module replaces this package's path with its own release's
// folder (hack/cluster/new-release.sh).
package release

import (
	"context"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	noop "go.opentelemetry.io/otel/trace/noop"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
)

type fake struct {
	*cadvisortest.Fake
	cores  int
	memory uint64
}

// Cadvisor is a cadvisor of `cores` whole cores and `memory` bytes.
func Cadvisor(name string, cores int, memory uint64) cadvisor.Interface {
	return &fake{Fake: &cadvisortest.Fake{NodeName: name}, cores: cores, memory: memory}
}

func (m *fake) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	info, err := m.Fake.MachineInfo()
	if err != nil {
		return nil, err
	}
	out := *info
	out.NumCores = m.cores
	out.MemoryCapacity = m.memory
	return &out, nil
}

// RuntimeClient is the kubelet's client of the CRI runtime served at endpoint.
func RuntimeClient(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeService(ctx, endpoint, 15*time.Second, noop.NewTracerProvider(), false)
}
