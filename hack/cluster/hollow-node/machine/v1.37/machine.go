// Package machine is kubemark's fake cadvisor with the machine size of a hollow node, for Kubernetes 1.37
// and later (MachineInfo takes a logger; cadvisor's types live in its lib module). Each release module
// replaces this package's path with the folder of its own release (hack/cluster/new-release.sh).
package machine

import (
	cadvisorapi "github.com/google/cadvisor/lib/model"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
)

type fake struct {
	*cadvisortest.Fake
	cores  int
	memory uint64
}

// New is a cadvisor of `cores` whole cores and `memory` bytes.
func New(name string, cores int, memory uint64) cadvisor.Interface {
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
