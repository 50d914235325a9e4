package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	noop "go.opentelemetry.io/otel/trace/noop"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	probetest "k8s.io/kubernetes/pkg/kubelet/prober/testing"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	kubeletutil "k8s.io/kubernetes/pkg/kubelet/util"
	"k8s.io/kubernetes/pkg/util/oom"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/configmap"
	"k8s.io/kubernetes/pkg/volume/csi"
	"k8s.io/kubernetes/pkg/volume/downwardapi"
	"k8s.io/kubernetes/pkg/volume/emptydir"
	"k8s.io/kubernetes/pkg/volume/hostpath"
	"k8s.io/kubernetes/pkg/volume/local"
	"k8s.io/kubernetes/pkg/volume/projected"
	"k8s.io/kubernetes/pkg/volume/secret"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
	"k8s.io/mount-utils"
)

// Node is what sets one hollow kubelet apart: its name, kubelet port (0: none), pod capacity and labels.
type Node struct {
	Name    string
	Port    int
	MaxPods int
	Labels  map[string]string
}

// KubeletConfig is the kubelet's flags and configuration for a hollow node: the release's defaults, with
// the settings kubemark's hollow kubelet used up to 1.37 (so a 1.38 node behaves like the 1.36 and 1.37
// ones): a root folder of its own under $TMPDIR, quick pod syncs and status updates, no cgroups per QoS
// class, no DNS, and node registration on. Unlike kubemark's, it leaves the iptables chains alone.
func KubeletConfig(node Node) (*options.KubeletFlags, *kubeletconfig.KubeletConfiguration, error) {
	root, err := os.MkdirTemp("", "hollow-kubelet.")
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet root folder: %w", err)
	}
	staticPods, podLogs := filepath.Join(root, "static-pods"), filepath.Join(root, "pod-logs")
	for _, dir := range []string{staticPods, podLogs} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("kubelet folder: %w", err)
		}
	}
	klog.InfoS("hollow kubelet root folder", "path", root)

	f := options.NewKubeletFlags()
	f.RootDirectory = root
	f.HostnameOverride = node.Name
	f.NodeLabels = node.Labels
	f.MinimumGCAge = metav1.Duration{Duration: time.Minute}
	f.MaxContainerCount = 100
	f.MaxPerPodContainerCount = 2

	c, err := options.NewKubeletConfiguration()
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet configuration: %w", err)
	}
	c.RegisterNode = true
	c.EnableServer = true
	c.Port = int32(node.Port)
	c.MaxPods = int32(node.MaxPods)
	c.StaticPodPath = staticPods
	c.StaticPodURL = ""
	c.PodLogsDir = podLogs
	c.SyncFrequency.Duration = 10 * time.Second
	c.FileCheckFrequency.Duration = 20 * time.Second
	c.HTTPCheckFrequency.Duration = 20 * time.Second
	c.NodeStatusUpdateFrequency.Duration = 10 * time.Second
	c.NodeStatusReportFrequency.Duration = 5 * time.Minute
	c.EvictionPressureTransitionPeriod.Duration = 5 * time.Minute
	c.VolumeStatsAggPeriod.Duration = time.Minute
	c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent = 90, 80
	c.SerializeImagePulls = true
	c.RegistryPullQPS, c.RegistryBurst = 5, 10
	c.ClusterDNS = []string{}
	c.ResolverConfig = kubetypes.ResolvConfDefault
	c.HairpinMode = kubeletconfig.HairpinVeth
	c.MaxOpenFiles = 1024
	// No cgroups: the container manager is a stub, and the pod cgroup settings live in memory.
	c.CgroupsPerQOS = false
	c.CgroupRoot, c.SystemCgroups, c.KubeletCgroups = "", "", "/kubelet"
	c.CPUCFSQuota = true
	c.ProtectKernelDefaults = false
	// Nothing on the host's firewall: the kubelet's iptables chains are left to real nodes (and the iptables
	// module is a stand-in that finds none, hack/cluster/stand-ins/iptables-wrappers).
	c.MakeIPTablesUtilChains = false
	c.EnableControllerAttachDetach = false
	c.EnableDebuggingHandlers = true
	c.LocalStorageCapacityIsolation = true
	return f, c, nil
}

// volumePlugins are the in-tree plugins a pod on a hollow node may name (its service account token is a
// projected volume); network and block storage plugins are left out, as no pod here has such a volume.
func volumePlugins() []volume.VolumePlugin {
	var all []volume.VolumePlugin
	all = append(all, emptydir.ProbeVolumePlugins()...)
	all = append(all, hostpath.FakeProbeVolumePlugins(volume.VolumeConfig{})...)
	all = append(all, secret.ProbeVolumePlugins()...)
	all = append(all, configmap.ProbeVolumePlugins()...)
	all = append(all, downwardapi.ProbeVolumePlugins()...)
	all = append(all, projected.ProbeVolumePlugins()...)
	all = append(all, local.ProbeVolumePlugins()...)
	all = append(all, csi.ProbeVolumePlugins()...)
	return all
}

// KubeletDeps are fakes for everything the kubelet would take from the host (mounts, OOM scores, the OS,
// the event recorder, which would read /dev/kmsg), around the given clients, cadvisor, runtime and
// container manager.
func KubeletDeps(client, heartbeat *clientset.Clientset, cadvisorInterface cadvisor.Interface,
	images internalapi.ImageManagerService, runtime internalapi.RuntimeService,
	containers cm.ContainerManager) *kubelet.Dependencies {
	return &kubelet.Dependencies{
		KubeClient:                client,
		HeartbeatClient:           heartbeat,
		CAdvisorInterface:         cadvisorInterface,
		RemoteRuntimeService:      runtime,
		RemoteImageService:        images,
		ContainerManager:          containers,
		ProbeManager:              probetest.FakeManager{},
		OSInterface:               &containertest.FakeOS{},
		VolumePlugins:             volumePlugins(),
		OOMAdjuster:               oom.NewFakeOOMAdjuster(),
		Mounter:                   &mount.FakeMounter{},
		Subpather:                 &subpath.FakeSubpath{},
		HostUtil:                  hostutil.NewFakeHostUtil(nil),
		PodStartupLatencyTracker:  kubeletutil.NewPodStartupLatencyTracker(),
		NodeStartupLatencyTracker: kubeletutil.NewNodeStartupLatencyTracker(klog.Background()),
		TracerProvider:            noop.NewTracerProvider(),
		Recorder:                  &record.FakeRecorder{},
	}
}

// RunKubelet starts the kubelet's loops and returns; they run until ctx ends.
func RunKubelet(ctx context.Context, flags *options.KubeletFlags, config *kubeletconfig.KubeletConfiguration,
	deps *kubelet.Dependencies) error {
	return kubeletapp.RunKubelet(ctx, &options.KubeletServer{KubeletFlags: *flags, KubeletConfiguration: *config}, deps)
}
