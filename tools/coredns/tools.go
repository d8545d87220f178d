//go:build tools

// Package tools pins CoreDNS, the cluster DNS kubeadm deploys, at the
// version kubeadm v1.32.13 names (`kubeadm config images list`), for the
// kind node image (see ../README.md).
package tools

import _ "github.com/coredns/coredns"
