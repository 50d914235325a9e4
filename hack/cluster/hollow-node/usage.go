// Container memory usage for the kubelet's stats calls, read from the usage file vpa sim writes.
package main

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// defaultUsage is a container's memory usage when the file does not name it.
const defaultUsage = 20 << 20

// usageFile maps "namespace/pod/container" (or "*") to bytes; it is read again when its modification
// time changes, so a writer can replace it at any time (vpa sim writes a new file and renames it).
type usageFile struct {
	path    string
	mu      sync.Mutex
	modTime time.Time
	size    int64
	bytes   map[string]uint64
}

func (u *usageFile) lookup(namespace, pod, container string) uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reload()
	if b, ok := u.bytes[namespace+"/"+pod+"/"+container]; ok {
		return b
	}
	if b, ok := u.bytes["*"]; ok {
		return b
	}
	return defaultUsage
}

func (u *usageFile) reload() {
	if u.path == "" {
		return
	}
	info, err := os.Stat(u.path)
	if err != nil {
		u.bytes = nil
		return
	}
	if info.ModTime().Equal(u.modTime) && info.Size() == u.size && u.bytes != nil {
		return
	}
	f, err := os.Open(u.path)
	if err != nil {
		return
	}
	defer f.Close()
	out := map[string]uint64{}
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		fields := strings.Fields(scan.Text())
		if len(fields) != 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		b, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			klog.InfoS("usage file: line skipped", "file", u.path, "line", scan.Text())
			continue
		}
		out[fields[0]] = b
	}
	u.bytes, u.modTime, u.size = out, info.ModTime(), info.Size()
}

// usageRuntime is the fake CRI runtime client with stats calls that answer the usage file's memory usage
// (the fake runtime itself reports none) and a log line for every container resource update.
type usageRuntime struct {
	internalapi.RuntimeService
	usage *usageFile
}

const (
	labelNamespace = "io.kubernetes.pod.namespace"
	labelPod       = "io.kubernetes.pod.name"
	labelContainer = "io.kubernetes.container.name"
)

func (r *usageRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) error {
	if res != nil && res.Linux != nil {
		klog.InfoS("container resources updated", "container", id, "memoryLimit", res.Linux.MemoryLimitInBytes,
			"cpuShares", res.Linux.CpuShares, "cpuQuota", res.Linux.CpuQuota)
	}
	return r.RuntimeService.UpdateContainerResources(ctx, id, res)
}

func (r *usageRuntime) containerStats(c *runtimeapi.Container) *runtimeapi.ContainerStats {
	now := time.Now().UnixNano()
	used := r.usage.lookup(c.Labels[labelNamespace], c.Labels[labelPod], c.Labels[labelContainer])
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id: c.Id, Metadata: c.Metadata, Labels: c.Labels, Annotations: c.Annotations,
		},
		Cpu: &runtimeapi.CpuUsage{
			Timestamp:            now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 0},
			UsageNanoCores:       &runtimeapi.UInt64Value{Value: 0},
		},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: used},
			UsageBytes:      &runtimeapi.UInt64Value{Value: used},
			RssBytes:        &runtimeapi.UInt64Value{Value: used},
		},
	}
}

func (r *usageRuntime) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	list, err := r.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: id})
	if err != nil || len(list) == 0 {
		return r.RuntimeService.ContainerStats(ctx, id)
	}
	return r.containerStats(list[0]), nil
}

func (r *usageRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	cf := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	if filter != nil {
		cf.Id, cf.PodSandboxId, cf.LabelSelector = filter.Id, filter.PodSandboxId, filter.LabelSelector
	}
	list, err := r.ListContainers(ctx, cf)
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.ContainerStats, 0, len(list))
	for _, c := range list {
		out = append(out, r.containerStats(c))
	}
	return out, nil
}

func (r *usageRuntime) sandboxStats(ctx context.Context, s *runtimeapi.PodSandbox) (*runtimeapi.PodSandboxStats, error) {
	containers, err := r.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: s.Id})
	if err != nil {
		return nil, err
	}
	var used uint64
	for _, c := range containers {
		used += c.Memory.UsageBytes.Value
	}
	now := time.Now().UnixNano()
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: s.Id, Metadata: s.Metadata, Labels: s.Labels, Annotations: s.Annotations},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu: &runtimeapi.CpuUsage{
				Timestamp:            now,
				UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 0},
				UsageNanoCores:       &runtimeapi.UInt64Value{Value: 0},
			},
			Memory: &runtimeapi.MemoryUsage{
				Timestamp:       now,
				WorkingSetBytes: &runtimeapi.UInt64Value{Value: used},
				UsageBytes:      &runtimeapi.UInt64Value{Value: used},
				RssBytes:        &runtimeapi.UInt64Value{Value: used},
			},
			Containers: containers,
		},
	}, nil
}

func (r *usageRuntime) PodSandboxStats(ctx context.Context, id string) (*runtimeapi.PodSandboxStats, error) {
	list, err := r.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: id})
	if err != nil || len(list) == 0 {
		return r.RuntimeService.PodSandboxStats(ctx, id)
	}
	return r.sandboxStats(ctx, list[0])
}

func (r *usageRuntime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	sf := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	if filter != nil {
		sf.Id, sf.LabelSelector = filter.Id, filter.LabelSelector
	}
	list, err := r.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.PodSandboxStats, 0, len(list))
	for _, s := range list {
		st, err := r.sandboxStats(ctx, s)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
