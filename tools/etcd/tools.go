//go:build tools

// Package tools pins the etcd server (3.5) that the local control plane
// runs; `make kube-tools` builds it into bin/etcd.
package tools

import _ "go.etcd.io/etcd/server/v3"
