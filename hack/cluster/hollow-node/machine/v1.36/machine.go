// Package machine is kubemark's fake cadvisor with the machine size of a hollow node, for Kubernetes 1.36
// (MachineInfo takes no logger; cadvisor's types live in its info/v1 package). Each release module replaces
// this package's path with the folder of its own release (hack/cluster/new-release.sh).
package machine

import (
	cadvisorapi "github.com/google/cadvisor/info/v1"
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
