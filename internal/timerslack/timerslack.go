// Package timerslack sets how late the kernel may end a timed sleep of any
// thread of this process (Linux's timer slack, PR_SET_TIMERSLACK).
//
// Why a server wants it: the Go runtime's monitor thread (sysmon) sleeps
// 20 µs between its rounds after a system call woke the process from
// idling, until it has found nothing to do fifty times. With the kernel's
// default slack of 50 µs that is a wake-up every 70 µs or so in every
// process that just handled a message; sixteen ringnodes on two cores spent about
// a fifth of the CPUs on their monitors during an election round
// (tools/sched-profile.sh). A slack of a millisecond lets each monitor
// sleep that much longer and delays nothing the server waits on: network
// and disk events end a sleep at once, and its own timers are
// milliseconds or longer.
//
// Slack is per thread and inherited by the threads a thread creates and
// across execve, but the runtime starts its monitor before main runs. So
// Apply sets it on the calling thread and executes the program again: the
// new image's first thread, and every thread it starts, has it.
package timerslack

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Max is the largest slack Apply accepts: a slack longer than the
// server's shortest timer (the 10-ms hop acknowledgement) would change
// what the server does, not only when it wakes.
const Max = time.Millisecond * 5

// Check refuses a slack Apply would not take: "D: want 0 … to Max".
func Check(slack time.Duration) error {
	if slack < 0 || slack > Max {
		return fmt.Errorf("%v: want 0 (as inherited) to %v", slack, Max)
	}
	return nil
}

// Get returns the calling thread's slack.
func Get() (time.Duration, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("timer slack: %w", err)
	}
	return time.Duration(v), nil
}

// Apply makes slack (1 ns to Max) the timer slack of every thread of
// this process, executing the program again with the same arguments and
// the environment environ (the process's as it started: a program may
// have unset a secret since) unless its threads already have it; 0
// leaves the slack as inherited. It executes the program again as well
// when environ's GODEBUG is not the one this process started with (the
// monitor's setting, WithMonitorAwake). It returns only when nothing is
// left to do or on an error, after which the process runs on with the
// slack and GODEBUG it had.
func Apply(slack time.Duration, environ []string) error {
	if err := Check(slack); err != nil {
		return fmt.Errorf("timer slack %w", err)
	}
	runtime.LockOSThread() // the thread whose slack is set must be the one that executes
	defer runtime.UnlockOSThread()
	cur, err := Get()
	if err != nil {
		return err
	}
	setSlack := slack != 0 && cur != slack
	if !setSlack && godebug(environ) == os.Getenv("GODEBUG") {
		return nil
	}
	if setSlack {
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack), 0, 0, 0); err != nil {
			return fmt.Errorf("timer slack %v: %w", slack, err)
		}
		if now, err := Get(); err != nil || now != slack {
			return fmt.Errorf("timer slack %v: the kernel kept %v (%v)", slack, now, err)
		}
	}
	// By its path, not /proc/self/exe: the kernel names a process after
	// the file it executes, and ps, top and pkill would see "exe".
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, environ)
	}
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur), 0, 0, 0)
	return fmt.Errorf("timer slack %v: executing the program again: %w", slack, err)
}
