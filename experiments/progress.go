package experiments

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress shows how far a run is: a redrawn bar on a terminal, a plain
// line every tenth of the way (or every 10 s) otherwise, so CI logs and
// redirected output stay readable.
type Progress struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	label     string
	total     int
	done      int
	start     time.Time
	lastLine  time.Time
	lastTenth int
	now       func() time.Time
}

// NewProgress reports on w; tty decides the style.
func NewProgress(w io.Writer, tty bool, label string, total int) *Progress {
	p := &Progress{w: w, tty: tty, label: label, total: total, now: time.Now}
	p.start = p.now()
	p.lastLine = p.start
	return p
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Add records n more units done.
func (p *Progress) Add(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	now := p.now()
	if p.tty {
		p.drawBar(now)
		return
	}
	tenth := 0
	if p.total > 0 {
		tenth = p.done * 10 / p.total
	}
	if tenth > p.lastTenth || now.Sub(p.lastLine) >= 10*time.Second {
		p.lastTenth, p.lastLine = tenth, now
		fmt.Fprintf(p.w, "%s: %d/%d (%d%%) %s\n", p.label, p.done, p.total, p.percent(), now.Sub(p.start).Round(time.Millisecond))
	}
}

func (p *Progress) percent() int {
	if p.total <= 0 {
		return 0
	}
	return p.done * 100 / p.total
}

func (p *Progress) drawBar(now time.Time) {
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = min(width, p.done*width/p.total)
	}
	eta := ""
	if p.done > 0 && p.total > p.done {
		left := time.Duration(float64(now.Sub(p.start)) / float64(p.done) * float64(p.total-p.done))
		eta = " eta " + left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%% %d/%d%s\x1b[K", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.percent(), p.done, p.total, eta)
}

// Finish ends the display with the elapsed time.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.drawBar(p.now())
		fmt.Fprintln(p.w)
	}
	fmt.Fprintf(p.w, "%s: done, %d/%d in %s\n", p.label, p.done, p.total, p.now().Sub(p.start).Round(time.Millisecond))
}

// SetTotal sets the number of units the run will do.
func (p *Progress) SetTotal(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.total = n
	p.mu.Unlock()
}
