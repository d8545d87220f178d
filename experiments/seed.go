package experiments

// SubSeed derives the seed of repetition (or task) i from a master seed,
// so each repetition is reproducible on its own: splitmix64's finaliser
// over the master mixed with i. Changing it changes every simulated CSV.
func SubSeed(master uint64, i int) uint64 { return mix(master ^ mix(uint64(i)+1)) }

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
