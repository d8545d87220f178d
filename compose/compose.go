// Package compose embeds the compose files and Dockerfiles, so that the
// experiment runner can start stacks from any working directory.
package compose

import _ "embed"

// Ring is compose/ring.yml.
//
//go:embed ring.yml
var Ring []byte

// RingnodeDockerfile is compose/Dockerfile.ringnode.
//
//go:embed Dockerfile.ringnode
var RingnodeDockerfile []byte

// LB is compose/lb.yml, seed 004's agent and balancer stack.
//
//go:embed lb.yml
var LB []byte

// Dockerfiles of the stack's images, by binary name (FROM scratch, the
// static binary copied in).
var (
	//go:embed Dockerfile.worker
	WorkerDockerfile []byte
	//go:embed Dockerfile.agent
	AgentDockerfile []byte
	//go:embed Dockerfile.balancer
	BalancerDockerfile []byte
)
