// Package balancer is seed 004's weighted reverse proxy and the baselines
// it is compared with. The pickers (package pick) are pure: they choose a
// worker (an upstream) from weights and, for the load-aware ones, in-flight counts, and
// run the same in simulations (lb-efficiency, lbsim) and in the proxy. The proxy
// (proxy.go) swaps an immutable table of upstreams and picker atomically
// when the agent's weight feed (feed.go, wire format in
// internal/weightfeed) delivers a validated update, and keeps the last
// good table when a message is refused or the feed is lost.
package balancer
