package leaderapp

import "crypto/sha256"

// Work burns CPU in rounds of SHA-256 over a 64-byte block: the cost the paper gives a write
// beyond a read, to which the leader adds the propagation.
func Work(rounds int) [32]byte {
	var sum [32]byte
	block := make([]byte, 64)
	for range rounds {
		sum = sha256.Sum256(block)
		copy(block, sum[:])
	}
	return sum
}
