//go:build tools

// Package tools pins the commands this release module builds: the control plane, etcd and our hollow
// kubelet (hack/cluster/hollow-node, built against this release's kubelet code). It holds no code of its own.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "vpa.local/hack/cluster/hollow-node"
)
