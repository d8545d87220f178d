package proc

import (
	"fmt"
	"time"

	"github.com/prometheus/procfs"
)

// CPU is the processor time (user and system) that the process and its
// live descendants have used so far — nginx's workers are its master's
// children — in the kernel's clock ticks (10 ms). Two readings around a
// load run give what the run cost the process, however busy the machine:
// a steadier measure of a proxy's work per request than its throughput,
// which the neighbours' scheduling moves.
func (p *Proc) CPU() (time.Duration, error) {
	return TreeCPU(p.Pid())
}

// TreeCPU is CPU for any process id.
func TreeCPU(pid int) (time.Duration, error) {
	all, err := procfs.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	children := map[int][]int{}
	used := map[int]float64{}
	for _, p := range all {
		st, err := p.Stat()
		if err != nil {
			continue // gone since the listing
		}
		children[st.PPID] = append(children[st.PPID], p.PID)
		used[p.PID] = st.CPUTime()
	}
	if _, ok := used[pid]; !ok {
		return 0, fmt.Errorf("process %d: not running", pid)
	}
	total := 0.0
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], children[p]...)
		total += used[p]
	}
	return time.Duration(total * float64(time.Second)), nil
}
