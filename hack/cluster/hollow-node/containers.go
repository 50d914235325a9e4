// The container manager of a hollow node: kubemark's stub, plus an allocatable equal to the node's size
// and a pod container manager that keeps each pod's cgroup settings in memory.
package main

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

type containerManager struct {
	cm.ContainerManager
	size nodeSize
	pods *podCgroups
}

func newContainerManager(stub cm.ContainerManager, size nodeSize) *containerManager {
	return &containerManager{
		ContainerManager: stub,
		size:             size,
		pods:             &podCgroups{PodContainerManager: stub.NewPodContainerManager(), configs: map[types.UID]*cm.ResourceConfig{}},
	}
}

// GetNodeAllocatableAbsolute is what the kubelet's resize admission measures a resize against.
func (c *containerManager) GetNodeAllocatableAbsolute() v1.ResourceList {
	return c.size.allocatable()
}

// GetNodeAllocatableReservation takes away the part of a whole core a fractional --cpu does not have.
func (c *containerManager) GetNodeAllocatableReservation() v1.ResourceList {
	rest := int64(c.size.wholeCores())*1000 - c.size.cpuMilli
	if rest == 0 {
		return nil
	}
	return v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(rest, resource.DecimalSI)}
}

func (c *containerManager) NewPodContainerManager() cm.PodContainerManager {
	return c.pods
}

// podCgroups keeps each pod's cgroup settings (memory limit, CPU shares, quota, period) by pod UID, as
// the kubelet would have written them: from the pod's resources when the pod is first seen, then changed
// only by SetPodCgroupConfig, so a resize reads the settings of before the resize.
type podCgroups struct {
	cm.PodContainerManager
	mu      sync.Mutex
	configs map[types.UID]*cm.ResourceConfig
}

func (p *podCgroups) config(pod *v1.Pod) *cm.ResourceConfig {
	c, ok := p.configs[pod.UID]
	if !ok {
		c = cm.ResourceConfigForPod(pod, true, cm.QuotaPeriod, false, kubeletconfig.MemoryReservationPolicy(""))
		if c == nil {
			c = &cm.ResourceConfig{}
		}
		p.configs[pod.UID] = c
		klog.InfoS("pod cgroup created", "pod", klog.KObj(pod), "memory", ptrString(c.Memory),
			"cpuShares", ptrString(c.CPUShares), "cpuQuota", ptrString(c.CPUQuota))
	}
	return c
}

func (p *podCgroups) GetPodContainerName(pod *v1.Pod) (cm.CgroupName, string) {
	p.mu.Lock()
	p.config(pod) // the kubelet asks for the name when it starts the pod's containers
	p.mu.Unlock()
	name := cm.CgroupName{"kubepods", "pod" + string(pod.UID)}
	return name, "/kubepods/pod" + string(pod.UID)
}

func (p *podCgroups) EnsureExists(_ klog.Logger, pod *v1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.config(pod)
	return nil
}

func (p *podCgroups) Exists(pod *v1.Pod) bool {
	return true
}

func (p *podCgroups) Destroy(_ klog.Logger, name cm.CgroupName) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(name) > 0 {
		last := name[len(name)-1]
		if len(last) > 3 && last[:3] == "pod" {
			delete(p.configs, types.UID(last[3:]))
		}
	}
	return nil
}

func (p *podCgroups) GetPodCgroupConfig(pod *v1.Pod, name v1.ResourceName) (*cm.ResourceConfig, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.config(pod)
	// As a cgroup file system answers: every value is there, "max" (no limit) read back as -1.
	switch name {
	case v1.ResourceMemory:
		return &cm.ResourceConfig{Memory: orDefault(c.Memory, -1)}, nil
	case v1.ResourceCPU:
		return &cm.ResourceConfig{
			CPUShares: orDefault(c.CPUShares, uint64(cm.MinShares)),
			CPUQuota:  orDefault(c.CPUQuota, -1),
			CPUPeriod: orDefault(c.CPUPeriod, uint64(cm.QuotaPeriod)),
		}, nil
	}
	return &cm.ResourceConfig{}, nil
}

func (p *podCgroups) SetPodCgroupConfig(_ klog.Logger, pod *v1.Pod, rc *cm.ResourceConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.config(pod)
	if rc.Memory != nil {
		klog.InfoS("pod cgroup set", "pod", klog.KObj(pod), "memory", *rc.Memory, "was", ptrString(c.Memory))
		c.Memory = copyPtr(rc.Memory)
	}
	if rc.CPUShares != nil {
		klog.InfoS("pod cgroup set", "pod", klog.KObj(pod), "cpuShares", *rc.CPUShares, "was", ptrString(c.CPUShares))
		c.CPUShares = copyPtr(rc.CPUShares)
	}
	if rc.CPUQuota != nil {
		klog.InfoS("pod cgroup set", "pod", klog.KObj(pod), "cpuQuota", *rc.CPUQuota, "was", ptrString(c.CPUQuota))
		c.CPUQuota = copyPtr(rc.CPUQuota)
	}
	if rc.CPUPeriod != nil {
		c.CPUPeriod = copyPtr(rc.CPUPeriod)
	}
	return nil
}

func (p *podCgroups) GetPodCgroupMemoryUsage(pod *v1.Pod) (uint64, error) {
	return 0, nil
}

func copyPtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	out := *v
	return &out
}

func orDefault[T any](v *T, unset T) *T {
	if v == nil {
		return &unset
	}
	out := *v
	return &out
}

func ptrString[T any](v *T) any {
	if v == nil {
		return "unset"
	}
	return *v
}
