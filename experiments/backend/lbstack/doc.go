// Package lbstack is the live load-balancing experiments' backend: the
// HTTP workers (Docker containers or local processes), the balancer as a
// process, nginx in front of the same workers as the baseline, and wrk,
// the external load generator that measures both.
package lbstack
