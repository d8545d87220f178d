//go:build tools

// Package tools pins the Kubernetes components ringside builds, so that
// `go build` of them from this module uses exactly the versions in go.mod
// (see ../README.md): kube-apiserver for the kube tests, and everything a
// kind node image holds for `make kind-node-image`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
