//go:build tools

// Package tools pins kind, built from the Go module proxy into bin/ by
// `make kind` (see ../README.md).
package tools

import _ "sigs.k8s.io/kind"
