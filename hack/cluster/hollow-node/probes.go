// The probe manager of a hollow node: no probes run, and every running container counts as started and
// ready. kubemark's fake never marks a container started, so the kubelet would wait forever for a native
// sidecar (an init container with restartPolicy Always) to start before the pod's containers.
package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	probetest "k8s.io/kubernetes/pkg/kubelet/prober/testing"
)

type probes struct {
	probetest.FakeManager
}

func (probes) UpdatePodStatus(_ context.Context, _ *v1.Pod, status *v1.PodStatus) {
	started := func(cs *v1.ContainerStatus) {
		running := cs.State.Running != nil
		cs.Started = &running
		cs.Ready = running
	}
	for i := range status.ContainerStatuses {
		started(&status.ContainerStatuses[i])
	}
	for i := range status.InitContainerStatuses {
		cs := &status.InitContainerStatuses[i]
		started(cs)
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			cs.Ready = true // a plain init container that completed
		}
	}
}
