//go:build tools

// Package tools pins kube-apiserver so that `go build` of it from this
// module uses exactly the versions in go.mod (see ../README.md).
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
