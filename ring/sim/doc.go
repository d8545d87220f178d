// Package sim is a seeded discrete-event simulator for the ring election: a
// virtual clock, per-link delays, message loss, crashes and restarts,
// partitions, and message counts by type. It drives the same ring.Node the
// network server runs. Everything random flows from Config.Seed, so one seed
// always gives the same run.
package sim
