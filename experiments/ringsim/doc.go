// Package ringsim holds the ring-election experiments of seed 002 that run
// on the simulator: message complexity against Chang–Roberts' closed forms,
// and failover under random faults.
package ringsim
