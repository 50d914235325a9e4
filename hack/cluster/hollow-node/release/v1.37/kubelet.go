package release

import (
	"context"

	clientset "k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
)

// Node is what sets one hollow kubelet apart: its name, kubelet port (0: none), pod capacity and labels.
type Node struct {
	Name    string
	Port    int
	MaxPods int
	Labels  map[string]string
}

// KubeletConfig is the kubelet's flags and configuration for a hollow node. This release still ships
// kubemark, so its hollow kubelet settings are taken as they are.
func KubeletConfig(node Node) (*options.KubeletFlags, *kubeletconfig.KubeletConfiguration, error) {
	flags, config := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName:    node.Name,
		KubeletPort: node.Port,
		MaxPods:     node.MaxPods,
		NodeLabels:  node.Labels,
	})
	return flags, config, nil
}

// KubeletDeps is kubemark's set of fakes for everything the kubelet would take from the host.
func KubeletDeps(client, heartbeat *clientset.Clientset, cadvisorInterface cadvisor.Interface,
	images internalapi.ImageManagerService, runtime internalapi.RuntimeService,
	containers cm.ContainerManager) *kubelet.Dependencies {
	return kubemark.NewHollowKubelet(nil, nil, client, heartbeat, cadvisorInterface, images, runtime,
		containers).KubeletDeps
}

// RunKubelet starts the kubelet's loops and returns; they run until ctx ends.
func RunKubelet(ctx context.Context, flags *options.KubeletFlags, config *kubeletconfig.KubeletConfiguration,
	deps *kubelet.Dependencies) error {
	return kubeletapp.RunKubelet(ctx, &options.KubeletServer{KubeletFlags: *flags, KubeletConfiguration: *config}, deps)
}
