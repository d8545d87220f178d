// Package lbsim is a seeded discrete-event simulation of one balancer in
// front of N heterogeneous servers, driving the very pickers the live
// balancer runs (package balancer): Poisson arrivals, exponential service
// times scaled by each server's capacity, a few parallel slots and a
// bounded FIFO queue per server, and a noisy neighbour whose capacity drops
// mid-run. The pickers learn what they would learn live: requests in
// flight, observed latencies (p2c-ewma), per-response load reports
// (wrr-reports) and probe answers after a network round trip (prequal).
// Same Config and seed, same Result, bit for bit.
package lbsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/internal/loadreport"
)

// Config is one simulated run.
type Config struct {
	Picker     string
	Capacities []float64 // per server, relative speed (1 = one mean service time per request and slot)
	Slots      int       // requests a server serves at once
	QueueLimit int       // requests a server queues beyond its slots; more are dropped
	Service    time.Duration
	// Utilisation is the offered load over the servers' nominal capacity.
	Utilisation float64
	Duration    time.Duration // simulated time of arrivals
	WarmUp      time.Duration // requests arriving before it are not measured
	// Noisy is the server whose capacity drops to NoisyFactor of its own
	// at Duration/2 (a neighbour takes its CPU); −1 for none.
	Noisy       int
	NoisyFactor float64
	ProbeRTT    time.Duration // prequal's probe round trip
	Tuning      pick.Tuning
}

// Result is what one run measured.
type Result struct {
	Requests, Dropped int
	// Latency quantiles of measured requests (arrival to completion).
	P50, P99, P999, Mean time.Duration
	// The tail over every measured request offered, served or dropped: a
	// drop ranks after every served request (it is never answered), so a
	// quantile that falls among the drops is Unanswered. Over served
	// requests only, a picker that drops its slowest requests would look
	// faster the more it drops.
	OfferedP99, OfferedP999 time.Duration
	PerServer               []int // measured requests served by each server
	Events                  int   // simulation events processed
}

// Check names the first setting out of range.
func (c Config) Check() error {
	switch {
	case len(c.Capacities) == 0:
		return fmt.Errorf("lbsim: no servers")
	case c.Slots < 1 || c.QueueLimit < 0:
		return fmt.Errorf("lbsim: slots %d, queue limit %d: want ≥ 1 and ≥ 0", c.Slots, c.QueueLimit)
	case c.Service <= 0 || c.Duration <= 0 || c.WarmUp < 0 || c.WarmUp >= c.Duration || c.ProbeRTT < 0:
		return fmt.Errorf("lbsim: service %v, duration %v, warm-up %v, probe RTT %v: want positive, warm-up shorter than the run", c.Service, c.Duration, c.WarmUp, c.ProbeRTT)
	case !(c.Utilisation > 0 && c.Utilisation < 10):
		return fmt.Errorf("lbsim: utilisation %v: want (0, 10)", c.Utilisation)
	case c.Noisy >= len(c.Capacities) || c.Noisy >= 0 && !(c.NoisyFactor > 0 && c.NoisyFactor <= 1):
		return fmt.Errorf("lbsim: noisy server %d with factor %v: want a server index and a factor in (0, 1]", c.Noisy, c.NoisyFactor)
	}
	for i, x := range c.Capacities {
		if !(x > 0) || math.IsInf(x, 0) {
			return fmt.Errorf("lbsim: capacity of server %d is %v: want positive", i, x)
		}
	}
	return nil
}

type eventKind uint8

const (
	evArrival eventKind = iota
	evDone
	evProbe
	evNoisy
)

type event struct {
	at     time.Duration
	seq    uint64 // FIFO among simultaneous events: determinism
	kind   eventKind
	server int32
	rif    int32         // evDone: requests in flight at the server when it arrived
	start  time.Duration // evDone: the request's arrival
}

type server struct {
	capacity float64
	busy     int
	queue    []queued // FIFO (a ring)
	head     int
	queued   int
	// For load reports and probes: completions in the current and last
	// second, slot-busy time in them, and a latency EWMA.
	sec                int64
	done, lastDone     int
	busyNS, lastBusyNS float64
	busySince          time.Duration
	latency            loadreport.LatencyByRIF
}

type queued struct {
	at  time.Duration
	rif int32
}

type sim struct {
	c       Config
	now     time.Duration
	seq     uint64
	heap    []event
	servers []server
	loads   []*pick.Load
	picker  pick.Picker
	obs     pick.Observer
	prober  pick.Prober
	reports bool
	rng     *rand.Rand // service times and arrivals
	pickRng *rand.Rand // the picker's random bits
	hist    histogram
	res     Result
	probes  []int
	// Probe answers, due ProbeRTT after they were sent and so in the order
	// they were sent: a queue beside the heap (probes are most of
	// prequal's events), numbered as if pushed, so the order of events is
	// still the heap's.
	answers     []event
	answersHead int
}

// Run simulates c with every random draw from seed.
func Run(c Config, seed uint64) (Result, error) {
	if err := c.Check(); err != nil {
		return Result{}, err
	}
	c.Tuning = c.Tuning.WithDefaults()
	s := &sim{c: c, servers: make([]server, len(c.Capacities)), loads: pick.NewLoads(len(c.Capacities)),
		rng: rand.New(rand.NewPCG(seed, 0x5e41)), pickRng: rand.New(rand.NewPCG(seed, 0x91c4)),
		reports: c.Picker == pick.LoadReportWRR}
	for i, x := range c.Capacities {
		s.servers[i] = server{capacity: x, queue: make([]queued, c.QueueLimit)}
	}
	p, err := pick.NewPicker(c.Picker, c.Capacities, pick.Inputs{Loads: s.loads, Now: func() time.Duration { return s.now }, Tuning: c.Tuning})
	if err != nil {
		return Result{}, err
	}
	s.picker = p
	s.obs, _ = p.(pick.Observer)
	s.prober, _ = p.(pick.Prober)
	s.res.PerServer = make([]int, len(c.Capacities))

	nominal := 0.0
	for _, x := range c.Capacities {
		nominal += x * float64(c.Slots)
	}
	rate := c.Utilisation * nominal / c.Service.Seconds() // arrivals per second
	meanGap := float64(time.Second) / rate
	// The next arrival waits beside the heap, not in it: arrivals are half
	// of all events, and there is only ever one ahead. It is numbered as
	// if pushed, so the order of events — and every result — is the
	// heap's.
	arrival := s.numbered(event{at: time.Duration(s.rng.ExpFloat64() * meanGap), kind: evArrival})
	arriving := true
	if c.Noisy >= 0 {
		s.push(event{at: c.Duration / 2, kind: evNoisy, server: int32(c.Noisy)})
	}
	for arriving || len(s.heap) > 0 || s.answersHead < len(s.answers) {
		var e event
		switch src := s.earliest(arriving, arrival); src {
		case fromArrival:
			e = arrival
		case fromAnswers:
			e = s.answers[s.answersHead]
			s.answersHead++
		default:
			e = s.pop()
		}
		if e.at < s.now {
			// The heap, the arrival and the answers' queue each hand out
			// events in order; merged wrongly, time would run backwards.
			return Result{}, fmt.Errorf("lbsim: event at %v after one at %v (a bug in the event order)", e.at, s.now)
		}
		s.now = e.at
		s.res.Events++
		switch e.kind {
		case evArrival:
			next := e.at + time.Duration(s.rng.ExpFloat64()*meanGap)
			arriving = next < c.Duration
			if arriving {
				arrival = s.numbered(event{at: next, kind: evArrival})
			}
			s.arrive()
		case evDone:
			s.complete(int(e.server), e.start, int(e.rif))
		case evProbe:
			sv := &s.servers[e.server]
			rif := sv.busy + sv.queued
			s.prober.Probed(int(e.server), int64(rif), sv.latency.Estimate(rif))
		case evNoisy:
			s.servers[e.server].capacity *= c.NoisyFactor
		}
	}
	s.res.P50, s.res.P99, s.res.P999 = s.hist.quantile(0.5, s.hist.n), s.hist.quantile(0.99, s.hist.n), s.hist.quantile(0.999, s.hist.n)
	s.res.OfferedP99, s.res.OfferedP999 = s.hist.quantile(0.99, s.res.Requests), s.hist.quantile(0.999, s.res.Requests)
	if s.hist.n > 0 {
		s.res.Mean = time.Duration(s.hist.sum / float64(s.hist.n))
	}
	return s.res, nil
}

func (s *sim) arrive() {
	i := s.picker.Pick(s.pickRng.Uint64())
	if s.prober != nil {
		s.probes = s.prober.TakeProbes(s.probes[:0], s.pickRng.Uint64())
		// Answers are always in flight at high load: the queue's front is
		// reclaimed once it is half the slice, not only when it empties.
		if s.answersHead > 64 && 2*s.answersHead >= len(s.answers) {
			s.answers = s.answers[:copy(s.answers, s.answers[s.answersHead:])]
			s.answersHead = 0
		}
		for _, j := range s.probes {
			s.answers = append(s.answers, s.numbered(event{at: s.now + s.c.ProbeRTT, kind: evProbe, server: int32(j)}))
		}
	}
	measured := s.now >= s.c.WarmUp
	if measured {
		s.res.Requests++
	}
	sv := &s.servers[i]
	rif := int32(sv.busy + sv.queued)
	switch {
	case sv.busy < s.c.Slots:
		s.loads[i].Active.Add(1)
		s.serve(i, queued{s.now, rif})
	case sv.queued < len(sv.queue):
		s.loads[i].Active.Add(1)
		sv.queue[(sv.head+sv.queued)%len(sv.queue)] = queued{s.now, rif}
		sv.queued++
	default:
		if measured {
			s.res.Dropped++
		}
		if s.obs != nil {
			s.obs.Observe(i, 0, true) // refused at once: a failure
		}
	}
}

// serve starts request r on server i.
func (s *sim) serve(i int, r queued) {
	sv := &s.servers[i]
	s.account(sv)
	sv.busy++
	d := time.Duration(s.rng.ExpFloat64() * float64(s.c.Service) / sv.capacity)
	s.push(event{at: s.now + d, kind: evDone, server: int32(i), start: r.at, rif: r.rif})
}

func (s *sim) complete(i int, start time.Duration, rif int) {
	sv := &s.servers[i]
	s.account(sv)
	sv.busy--
	sv.done++
	lat := s.now - start
	sv.latency.Add(s.now, rif, lat)
	s.loads[i].Active.Add(-1)
	if s.obs != nil {
		s.obs.Observe(i, lat, false)
	}
	if s.reports {
		// Per-response load report (ORCA): the last complete second.
		s.loads[i].Reported(s.now, pick.LoadReport{QPS: float64(sv.lastDone), Utilization: sv.lastBusyNS / float64(time.Second) / float64(s.c.Slots)},
			s.c.Tuning.ErrorPenalty, s.c.Tuning.Expiry)
	}
	if start >= s.c.WarmUp {
		s.hist.add(lat)
		s.res.PerServer[i]++
	}
	if sv.queued > 0 {
		next := sv.queue[sv.head]
		sv.head = (sv.head + 1) % len(sv.queue)
		sv.queued--
		s.serve(i, next)
	}
}

// account adds the slot-busy time since the last change to the current
// second, rolling the seconds over first.
func (s *sim) account(sv *server) {
	sec := int64(s.now / time.Second)
	if sec != sv.sec {
		// Busy time up to the second's end belongs to it.
		end := time.Duration(sv.sec+1) * time.Second
		sv.busyNS += float64(sv.busy) * float64(end-sv.busySince)
		if sec == sv.sec+1 {
			sv.lastDone, sv.lastBusyNS = sv.done, sv.busyNS
		} else {
			sv.lastDone, sv.lastBusyNS = 0, float64(sv.busy)*float64(time.Second)
		}
		sv.sec, sv.done, sv.busyNS, sv.busySince = sec, 0, 0, time.Duration(sec)*time.Second
	}
	sv.busyNS += float64(sv.busy) * float64(s.now-sv.busySince)
	sv.busySince = s.now
}

// The event queue is a 4-ary heap: half the levels of a binary one, and
// a parent's four children share a cache line or two, so a pop — the
// simulation's commonest step, a third of lb-sim's time at n = 1,000 with
// a binary heap — compares more per level but walks fewer of them.
const arity = 4

// The three places the next event may wait.
const (
	fromHeap = iota
	fromArrival
	fromAnswers
)

// earliest says which of the next arrival, the oldest probe answer and
// the heap's top comes first.
func (s *sim) earliest(arriving bool, arrival event) int {
	src, first, found := fromHeap, event{}, len(s.heap) > 0
	if found {
		first = s.heap[0]
	}
	if arriving && (!found || arrival.before(first)) {
		src, first, found = fromArrival, arrival, true
	}
	if s.answersHead < len(s.answers) && (!found || s.answers[s.answersHead].before(first)) {
		src = fromAnswers
	}
	return src
}

// numbered gives e the next sequence number: events due at the same time
// come out in the order they were numbered.
func (s *sim) numbered(e event) event {
	e.seq = s.seq
	s.seq++
	return e
}

func (s *sim) push(e event) {
	e = s.numbered(e)
	s.heap = append(s.heap, e)
	h := s.heap
	k := len(h) - 1
	for k > 0 {
		p := (k - 1) / arity
		if !e.before(h[p]) {
			break
		}
		h[k] = h[p]
		k = p
	}
	h[k] = e
}

func (s *sim) pop() event {
	h := s.heap
	top := h[0]
	last := len(h) - 1
	e := h[last]
	h = h[:last]
	if n := len(h); n > 0 {
		k := 0
		for {
			c := arity*k + 1
			if c >= n {
				break
			}
			m := c
			for j := c + 1; j < c+arity && j < n; j++ {
				if h[j].before(h[m]) {
					m = j
				}
			}
			if !h[m].before(e) {
				break
			}
			h[k] = h[m]
			k = m
		}
		h[k] = e
	}
	s.heap = h
	return top
}

func (e event) before(o event) bool { return e.at < o.at || e.at == o.at && e.seq < o.seq }

// histogram counts latencies in buckets 1 % wide from 1 µs up: quantiles
// to within 1 %, in constant memory whatever the number of requests.
type histogram struct {
	counts []int
	n      int
	sum    float64
}

const bucketGrowth = 1.01

var logGrowth = math.Log(bucketGrowth)

func (h *histogram) add(d time.Duration) {
	b := 0
	if us := float64(d) / float64(time.Microsecond); us > 1 {
		b = int(math.Log(us)/logGrowth) + 1
	}
	for b >= len(h.counts) {
		h.counts = append(h.counts, 0)
	}
	h.counts[b]++
	h.n++
	h.sum += float64(d)
}

// Unanswered is a quantile of offered requests that falls among the
// dropped ones.
const Unanswered = time.Duration(math.MaxInt64)

// quantile is the upper edge of the bucket holding the q-quantile of
// total requests, the histogram's and, beyond them, unanswered ones.
func (h *histogram) quantile(q float64, total int) time.Duration {
	if total == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(total)))
	if rank > h.n {
		return Unanswered
	}
	seen := 0
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(math.Pow(bucketGrowth, float64(b)) * float64(time.Microsecond))
		}
	}
	return 0
}
