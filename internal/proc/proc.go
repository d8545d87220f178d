// Package proc runs a child process and reports its exit through a
// channel. exec.Cmd's ProcessState is written by the goroutine that calls
// Wait, so reading it from another goroutine is a data race; every process
// harness in the tree (control plane, ring servers, workers, nginx, Redis)
// goes through Proc instead.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Proc is a started process whose exit is observed exactly once.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, readable once done is closed
}

// Start starts cmd and a goroutine that waits for it; onExit (optional)
// runs after the process has been reaped and before Done is closed, for
// closing its log files.
func Start(cmd *exec.Cmd, onExit func()) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports, without blocking, whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the process's exit error; nil while it runs or after a clean exit.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Name is the base name of the binary, for messages.
func (p *Proc) Name() string { return filepath.Base(p.cmd.Path) }

// Signal sends sig; a process that has already exited is not an error.
func (p *Proc) Signal(sig os.Signal) {
	if !p.Exited() {
		p.cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends sig, waits up to grace for the exit, then kills.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) {
	p.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}
