package ring

// Bully is Garcia-Molina's bully election (1982): not a ring algorithm but
// the baseline key-value systems actually use, run over the same
// membership. A member sends ELECTION to every larger member; a larger
// member answers ANSWER and holds its own election; a member that no
// larger one answers — each refused, none there — leads and tells every
// member (the Machine's announcement to all). When the smallest member
// starts, each member's ELECTION goes to all larger ones and each is
// answered: at most n(n−1) election messages; when the largest starts,
// none (the announcement's n−1 apart). A member whose larger members stay
// silent without refusing waits for the Machine's round timeout.
type Bully struct {
	waiting  int // larger members asked, neither answered nor refused
	answered bool
	elected  bool
}

// Message kinds of the bully algorithm.
const (
	bullyElection uint8 = iota
	bullyAnswer
)

// NewBully is the registry's constructor.
func NewBully() Core { return &Bully{} }

func (b *Bully) Start(e *Env) {
	for _, u := range e.Members() {
		if e.Self().Less(u) && !e.IsDown(u) {
			b.waiting++
			e.Send(Message{Kind: bullyElection, Cand: e.Self(), To: u, Hops: 1, Dir: DirDirect})
		}
	}
	b.decide(e)
}

func (b *Bully) Receive(e *Env, m Message) {
	switch m.Kind {
	case bullyElection:
		if m.Cand.Less(e.Self()) {
			e.Send(Message{Kind: bullyAnswer, Cand: e.Self(), To: m.From, Hops: 1, Dir: DirDirect})
		}
	case bullyAnswer:
		b.answered = true
	}
}

// Undeliverable counts a refused ELECTION as no answer.
func (b *Bully) Undeliverable(e *Env, m Message) {
	if m.Kind == bullyElection {
		b.waiting--
		b.decide(e)
	}
}

func (b *Bully) decide(e *Env) {
	if b.waiting == 0 && !b.answered && !b.elected {
		b.elected = true
		e.Elect()
	}
}
