// Package purity holds the test that keeps ringside's pure cores pure
// (DESIGN §2): no network, no files, no processes, no Kubernetes and no
// wall clock in the state machines that the simulator and the shells share.
package purity
