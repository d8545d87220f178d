package pick

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"time"
)

// Tuning holds the latency- and load-aware pickers' parameters. The zero
// value means every default; each default is its source's.
type Tuning struct {
	// Decay is p2c-ewma's time constant τ (Finagle: 10 s).
	Decay time.Duration
	// FailurePenalty is the latency a failed request counts as in the
	// EWMA (ringside's choice; default 1 s).
	FailurePenalty time.Duration
	// Bias is least-request's active_request_bias (Envoy: 1.0).
	Bias float64
	// Choices is least-request's choice_count with equal weights (Envoy: 2).
	Choices int
	// Blackout, Expiry and Period are wrr-reports' blackout_period (10 s),
	// weight_expiration_period (3 min) and weight_update_period (1 s),
	// ErrorPenalty its error_utilization_penalty (1.0) — gRPC A58.
	Blackout, Expiry, Period time.Duration
	ErrorPenalty             float64
	// Prequal: probes sent per pick (RProbe), the pool's size, how often a
	// probe may be used, how old it may get, and the RIF quantile that
	// separates hot from cold replicas.
	RProbe      float64
	PoolSize    int
	Reuse       int
	MaxProbeAge time.Duration
	HotQuantile float64
}

// DefaultTuning is Tuning with every default filled in.
func DefaultTuning() Tuning {
	return Tuning{
		Decay: 10 * time.Second, FailurePenalty: time.Second, Bias: 1, Choices: 2,
		Blackout: 10 * time.Second, Expiry: 3 * time.Minute, Period: time.Second, ErrorPenalty: 1,
		RProbe: 3, PoolSize: 16, Reuse: 2, MaxProbeAge: time.Second, HotQuantile: 0.84,
	}
}

// WithDefaults is t with its zero fields set to the defaults.
func (t Tuning) WithDefaults() Tuning {
	d := DefaultTuning()
	return Tuning{
		Decay: cmp.Or(t.Decay, d.Decay), FailurePenalty: cmp.Or(t.FailurePenalty, d.FailurePenalty),
		Bias: cmp.Or(t.Bias, d.Bias), Choices: cmp.Or(t.Choices, d.Choices),
		Blackout: cmp.Or(t.Blackout, d.Blackout), Expiry: cmp.Or(t.Expiry, d.Expiry), Period: cmp.Or(t.Period, d.Period),
		ErrorPenalty: cmp.Or(t.ErrorPenalty, d.ErrorPenalty),
		RProbe:       cmp.Or(t.RProbe, d.RProbe), PoolSize: cmp.Or(t.PoolSize, d.PoolSize), Reuse: cmp.Or(t.Reuse, d.Reuse),
		MaxProbeAge: cmp.Or(t.MaxProbeAge, d.MaxProbeAge), HotQuantile: cmp.Or(t.HotQuantile, d.HotQuantile),
	}
}

// check names the first parameter out of range (after defaults).
func (t Tuning) check() error {
	t = t.WithDefaults()
	switch {
	case t.Decay < 0 || t.FailurePenalty < 0 || t.Blackout < 0 || t.Expiry < 0 || t.Period < 0 || t.MaxProbeAge < 0:
		return errors.New("tuning: durations must not be negative")
	case t.Bias < 0 || t.Bias > 16:
		return fmt.Errorf("tuning: bias %v outside 0…16", t.Bias)
	case t.Choices < 1 || t.Choices > 64:
		return fmt.Errorf("tuning: choices %d outside 1…64", t.Choices)
	case t.ErrorPenalty < 0:
		return fmt.Errorf("tuning: error penalty %v is negative", t.ErrorPenalty)
	case t.RProbe < 0 || t.RProbe > 16:
		return fmt.Errorf("tuning: probes per pick %v outside 0…16", t.RProbe)
	case t.PoolSize < 1 || t.PoolSize > maxPool:
		return fmt.Errorf("tuning: probe pool size %d outside 1…%d", t.PoolSize, maxPool)
	case t.Reuse < 1:
		return fmt.Errorf("tuning: probe reuse %d must be at least 1", t.Reuse)
	case t.HotQuantile <= 0 || t.HotQuantile > 1:
		return fmt.Errorf("tuning: hot quantile %v outside (0, 1]", t.HotQuantile)
	}
	return nil
}

// Define registers the tuning flags on fs, prefixed (for example "lb-"),
// and returns their names.
func (t *Tuning) Define(fs *flag.FlagSet, prefix string) []string {
	d := DefaultTuning()
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	fs.DurationVar(&t.Decay, prefix+"ewma-decay", d.Decay, "p2c-ewma: time constant of the latency EWMA (Finagle)")
	fs.DurationVar(&t.FailurePenalty, prefix+"failure-penalty", d.FailurePenalty, "p2c-ewma: latency a failed request counts as")
	fs.Float64Var(&t.Bias, prefix+"active-bias", d.Bias, "least-request: active_request_bias (Envoy)")
	fs.IntVar(&t.Choices, prefix+"choices", d.Choices, "least-request: choice_count with equal weights (Envoy)")
	fs.DurationVar(&t.Blackout, prefix+"blackout", d.Blackout, "wrr-reports: blackout period (gRPC A58)")
	fs.DurationVar(&t.Expiry, prefix+"weight-expiry", d.Expiry, "wrr-reports: weight expiration period (gRPC A58)")
	fs.DurationVar(&t.Period, prefix+"weight-period", d.Period, "wrr-reports: weight update period (gRPC A58)")
	fs.Float64Var(&t.ErrorPenalty, prefix+"error-penalty", d.ErrorPenalty, "wrr-reports: error utilisation penalty (gRPC A58)")
	fs.Float64Var(&t.RProbe, prefix+"probes", d.RProbe, "prequal: probes sent per pick")
	fs.IntVar(&t.PoolSize, prefix+"pool", d.PoolSize, "prequal: probe pool size")
	fs.IntVar(&t.Reuse, prefix+"reuse", d.Reuse, "prequal: picks one probe may serve")
	fs.DurationVar(&t.MaxProbeAge, prefix+"probe-age", d.MaxProbeAge, "prequal: age past which a probe is dropped")
	fs.Float64Var(&t.HotQuantile, prefix+"hot-quantile", d.HotQuantile, "prequal: RIF quantile above which a replica is hot")
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			names = append(names, f.Name)
		}
	})
	return names
}
