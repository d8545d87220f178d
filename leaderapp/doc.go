// Package leaderapp is the leader-based stateful application the BLD
// paper assumes (seed 000 §3.2, Fig. 2; seed 003 Fig. 4): every replica
// runs beside an elector sidecar and learns its role by asking it who
// leads. Reads are served by any replica from its own store; a write is
// applied by the leader, which propagates it to every follower and answers
// only when all of them have it — so whichever follower the next election
// makes leader holds every write that was acknowledged. A write that
// reaches a follower is forwarded to the leader (the paper's redirect); a
// request while no leader is known gets 503. A write costs more CPU than a
// read, as in the paper (Work).
//
// The core is the role (Role, from the sidecar's answers) and the store
// (Store, ordered by the leader's sequence numbers); Server is the HTTP
// shell and SmartClient the paper's "smart write" client, which asks the
// sidecars who leads and writes to the leader directly.
package leaderapp
