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
