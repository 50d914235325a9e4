// Command hollow-node runs one node of `vpa sim --kubelet=hollow`: Kubernetes' own kubelet code
// (pkg/kubelet, built the way kubemark's hollow node builds it, with the fake CRI runtime and the fake
// cadvisor; kubemark itself up to 1.37, our own setup of the same on 1.38, which no longer ships it) plus
// the three fakes an in-place resize needs and stock kubemark lacks:
//
//   - a node capacity taken from --cpu, --memory and --max-pods (kubemark's is 1 CPU, and its container
//     manager reports no allocatable, so every resize would be Infeasible);
//   - pod cgroup settings kept in memory (kubemark's pod container manager refuses to read them, so an
//     accepted resize could not be carried out);
//   - each container's memory usage read from --usage-file (so the kubelet's own "decrease a memory limit
//     below usage" check runs against what vpa sim's usage profiles say).
//
// Everything that decides a resize (admission, Deferred/Infeasible, actuation, the PodResizeInProgress
// Error, the status the API shows) is the release's kubelet code. Nothing touches the host: no root, no
// cgroups, no sysctls, and every listener is on 127.0.0.1 (the kubelet server only when --kubelet-port is
// set, read-only and healthz ports off). Kubelet files go under $TMPDIR.
//
// It is built from each release module in hack/cluster/v1.<minor>, so it runs that release's kubelet; the
// parts whose Go API differs between releases (the fake cadvisor, the runtime client, the kubelet's
// settings and host fakes) are the package
// vpa.local/hack/cluster/hollow-node/release, which each release module takes from release/v1.<minor>.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm"

	"vpa.local/hack/cluster/hollow-node/release"
)

type options struct {
	name       string
	kubeconfig string
	port       int
	cpu        string
	memory     string
	maxPods    int
	usageFile  string
	labels     string
	version    bool
}

func main() {
	o := options{}
	fs := flag.CommandLine
	klog.InitFlags(fs)
	fs.StringVar(&o.name, "name", "hollow-node", "node name")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (required)")
	fs.IntVar(&o.port, "kubelet-port", 0, "port of the kubelet's HTTPS server on 127.0.0.1 (0: no server)")
	fs.StringVar(&o.cpu, "cpu", "4", "node CPU capacity and allocatable (a quantity: 4, 3500m)")
	fs.StringVar(&o.memory, "memory", "8Gi", "node memory capacity and allocatable (a quantity)")
	fs.IntVar(&o.maxPods, "max-pods", 110, "node pod capacity")
	fs.StringVar(&o.usageFile, "usage-file", "",
		"file of container memory usage, one \"namespace/pod/container bytes\" line each, or \"* bytes\" for all; "+
			"read on every stats call (absent: 20Mi each)")
	fs.StringVar(&o.labels, "node-labels", "", "extra node labels, key=value,key=value")
	fs.BoolVar(&o.version, "version", false, "print the Kubernetes release this node's kubelet is built from")
	flag.Parse()
	if o.version {
		fmt.Println(version.Get().GitVersion)
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "hollow-node: %v\n", err)
		os.Exit(2)
	}
}

func run(o options) error {
	if o.kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	cpu, err := resource.ParseQuantity(o.cpu)
	if err != nil || cpu.MilliValue() <= 0 {
		return fmt.Errorf("--cpu=%q: want a positive quantity such as 4 or 3500m", o.cpu)
	}
	memory, err := resource.ParseQuantity(o.memory)
	if err != nil || memory.Value() <= 0 {
		return fmt.Errorf("--memory=%q: want a positive quantity such as 8Gi", o.memory)
	}
	if o.maxPods <= 0 {
		return fmt.Errorf("--max-pods=%d: want a positive number", o.maxPods)
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(o.labels, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--node-labels: %q is not key=value", kv)
		}
		labels[k] = v
	}
	// Stats from the CRI (not cadvisor) are how the usage file reaches the kubelet's resize checks. The gate
	// exists in every release built here (1.36-1.38); one that exists only in some (InPlacePodVerticalScaling
	// is gone in 1.38) belongs in release/v1.<minor>, as the kubelet refuses a gate it does not know.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{"PodAndContainerStatsFromCRI": true}); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	restConfig, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig=%s: %w", o.kubeconfig, err)
	}
	restConfig.UserAgent = "hollow-kubelet"
	restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	restConfig.QPS, restConfig.Burst = 50, 100
	client, err := clientset.NewForConfig(restConfig)
	if err != nil {
		return err
	}

	flags, config, err := release.KubeletConfig(release.Node{Name: o.name, Port: o.port, MaxPods: o.maxPods, Labels: labels})
	if err != nil {
		return err
	}
	// The kubelet's default binds on 0.0.0.0; this node stays on loopback or does not listen at all.
	config.Address = "127.0.0.1"
	config.EnableServer = o.port != 0
	config.ReadOnlyPort = 0
	config.HealthzPort = 0
	config.HealthzBindAddress = "127.0.0.1"
	config.ProviderID = "vpa-sim://" + o.name

	heartbeatConfig := *restConfig
	heartbeatConfig.Timeout = config.NodeStatusUpdateFrequency.Duration
	if lease := time.Duration(config.NodeLeaseDurationSeconds) * time.Second; heartbeatConfig.Timeout > lease {
		heartbeatConfig.Timeout = lease
	}
	heartbeatConfig.QPS = -1
	heartbeatClient, err := clientset.NewForConfig(&heartbeatConfig)
	if err != nil {
		return err
	}

	// The fake CRI runtime, served on a socket in the kubelet's own root folder rather than under /tmp.
	endpoint := "unix://" + filepath.Join(flags.RootDirectory, "cri.sock")
	fakeRuntime := fakeremote.NewFakeRemoteRuntime()
	if err := fakeRuntime.Start(endpoint); err != nil {
		return fmt.Errorf("fake runtime: %w", err)
	}
	defer fakeRuntime.Stop()
	config.ContainerRuntimeEndpoint = endpoint
	config.ImageServiceEndpoint = endpoint
	runtimeClient, err := release.RuntimeClient(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("runtime client: %w", err)
	}
	runtime := &usageRuntime{RuntimeService: runtimeClient, usage: &usageFile{path: o.usageFile}}

	node := nodeSize{cpuMilli: cpu.MilliValue(), memory: memory.Value(), pods: int64(o.maxPods)}
	containerManager := newContainerManager(cm.NewStubContainerManager(), node)
	cadvisor := release.Cadvisor(o.name, node.wholeCores(), uint64(node.memory))

	deps := release.KubeletDeps(client, heartbeatClient, cadvisor, fakeRuntime.ImageService, runtime,
		containerManager)
	deps.ProbeManager = probes{}
	klog.InfoS("hollow node starting", "node", o.name, "kubeletVersion", version.Get().GitVersion,
		"cpu", cpu.String(), "memory", memory.String(), "maxPods", o.maxPods, "usageFile", o.usageFile)
	if err := release.RunKubelet(ctx, flags, config, deps); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	<-ctx.Done()
	klog.InfoS("hollow node stopping", "node", o.name)
	klog.Flush()
	_ = os.RemoveAll(flags.RootDirectory)
	return nil
}

// nodeSize is what the node offers: capacity and allocatable are the same, nothing is reserved.
type nodeSize struct {
	cpuMilli int64
	memory   int64
	pods     int64
}

// wholeCores is the CPU capacity in whole cores (cadvisor's machine info counts cores); a fractional
// --cpu is reserved away from the rounded-up core count so that allocatable equals the flag.
func (n nodeSize) wholeCores() int {
	return int((n.cpuMilli + 999) / 1000)
}

func (n nodeSize) allocatable() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(n.cpuMilli, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(n.memory, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(n.pods, resource.DecimalSI),
	}
}
