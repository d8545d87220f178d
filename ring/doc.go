// Package ring implements the Chang–Roberts ring election of seed 002 as a
// pure state machine (DESIGN §3.1): no I/O, no goroutines, no wall clock.
// A shell — the seeded simulator in ring/sim or the TCP transport of
// cmd/ringnode — feeds it messages and the current time and sends what it
// returns, the way etcd-io/raft is driven by its application.
package ring
