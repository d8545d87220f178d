// Package compose embeds the compose files, so that the
// experiment runner can start stacks from any working directory.
package compose

import _ "embed"

// Ring is compose/ring.yml.
//
//go:embed ring.yml
var Ring []byte

// LB is compose/lb.yml, seed 004's agent and balancer stack.
//
//go:embed lb.yml
var LB []byte
