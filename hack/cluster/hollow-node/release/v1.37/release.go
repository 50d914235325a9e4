// Package release holds the parts of a hollow node whose Go API differs between Kubernetes releases:
// kubemark's fake cadvisor with the node's machine size, the client of the fake CRI runtime, and the kubelet's
// settings and host fakes (kubelet.go: kubemark's own, which this release still ships). This is
// the 1.37 one (MachineInfo takes a logger, cadvisor's types live in its lib module, and the runtime
// client has a builder). Each release module replaces this package's path with its own release's
// folder (hack/cluster/new-release.sh).
package release

import (
	"context"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
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

func (m *fake) MachineInfo(logger klog.Logger) (*cadvisorapi.MachineInfo, error) {
	info, err := m.Fake.MachineInfo(logger)
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
	return remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).WithConnectionTimeout(15 * time.Second).Build(ctx)
}
