// Package pick holds the balancer's pickers: seed 004's weighted random
// and the baselines it is compared with (smooth WRR, round robin,
// least-conn, p2c, p2c-ewma, least-request, load-report WRR, Prequal).
// They are pure cores: a picker chooses from weights, per-worker Loads and
// a clock it is given, so the proxy and the simulators (lbsim,
// lb-efficiency) run the same code.
package pick
