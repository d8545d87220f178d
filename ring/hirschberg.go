package ring

// HirschbergSinclair is Hirschberg and Sinclair's election (1980) on a
// bidirectional ring. In phase k a candidate sends a probe both ways to
// distance 2^k; a member that is larger swallows it, one that is smaller
// passes it on, and the member at distance 2^k sends a reply back. A
// candidate that gets both replies goes on to phase k+1; one whose probe
// comes round to itself has passed every member: it leads. A candidate
// survives phase k only as the largest within 2^k either way, so at most
// ⌈n/(2^k+1)⌉ start phase k+1, each costing at most 4·2^(k+1) messages:
// in all at most 8n⌈log₂ n⌉ + 8n election messages.
type HirschbergSinclair struct {
	phase   uint32
	replies int  // replies of the current phase come back
	out     bool // swallowed: no longer a candidate
}

// Message kinds of Hirschberg–Sinclair.
const (
	hsProbe uint8 = iota
	hsReply
)

// NewHirschbergSinclair is the registry's constructor.
func NewHirschbergSinclair() Core { return &HirschbergSinclair{} }

func (h *HirschbergSinclair) Start(e *Env) { h.probe(e) }

func (h *HirschbergSinclair) probe(e *Env) {
	h.replies = 0
	for _, d := range []Dir{DirNext, DirPrev} {
		e.Send(Message{Kind: hsProbe, Cand: e.Self(), Phase: h.phase, Hops: 1, Dir: d})
	}
}

func (h *HirschbergSinclair) Receive(e *Env, m Message) {
	if m.Kind == hsReply {
		h.reply(e, m)
		return
	}
	switch m.Cand.Cmp(e.Self()) {
	case 0:
		// Its own probe came round: it has passed every member. (With a
		// ring of two, both probes do.)
		if !h.out {
			h.out = true // announce once
			e.Elect()
		}
	case 1:
		h.out = true
		if m.Phase < 32 && m.Hops < 1<<m.Phase {
			e.Forward(m)
			return
		}
		// The probe's last hop: reply towards the candidate.
		e.Send(Message{Kind: hsReply, Cand: m.Cand, Phase: m.Phase, Hops: 1, Dir: m.Dir.Reverse()})
	}
	// Smaller: swallowed.
}

func (h *HirschbergSinclair) reply(e *Env, m Message) {
	if m.Cand != e.Self() {
		e.Forward(m)
		return
	}
	if h.out || m.Phase != h.phase {
		return
	}
	if h.replies++; h.replies == 2 {
		h.phase++
		h.probe(e)
	}
}
