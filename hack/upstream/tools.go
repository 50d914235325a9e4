//go:build tools

// Package tools pins upstream VPA's three commands this module builds; it holds no code of its own.
package tools

import (
	_ "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/admission-controller"
	_ "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender"
	_ "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater"
)
