// Package bld holds the Kubernetes leader elections of seeds 000, 001 and
// 003 on client-go: the default election (client-go's leaderelection,
// unchanged), Balanced Leader Distribution and its literal reading,
// BLD-plus, and RTT-ranked succession with graceful hand-over. The
// decisions — who may acquire, who succeeds whom — are pure functions;
// the elector loop and the locks are the shell around them.
package bld
