package accept

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// script is a listener that answers Accept from a list: an error, or a
// connection (nil error, nil conn stands for one).
type script struct {
	net.Listener
	errs  []error
	calls int
}

func (s *script) Accept() (net.Conn, error) {
	s.calls++
	if len(s.errs) == 0 {
		return nil, net.ErrClosed
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	if err != nil {
		return nil, err
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (s *script) Addr() net.Addr { return &net.TCPAddr{} }

func accept(err syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", err)}
}

// Out of descriptors the loop waits and goes on; it returns only once the
// listener is closed, having handed on every connection.
func TestLoopOutlastsEMFILE(t *testing.T) {
	ln := &script{errs: []error{accept(syscall.EMFILE), nil, accept(syscall.ENFILE), accept(syscall.ECONNABORTED), nil}}
	handled := 0
	err := Loop(ln, nil, func(c net.Conn) { handled++; c.Close() })
	assert.ErrorIs(t, err, net.ErrClosed)
	assert.Equal(t, 2, handled)
	assert.Equal(t, 6, ln.calls)
}

func TestLoopStopsOnAPermanentError(t *testing.T) {
	broken := errors.New("listener broken")
	ln := &script{errs: []error{accept(syscall.EMFILE), broken, nil}}
	err := Loop(ln, nil, func(c net.Conn) { c.Close() })
	require.ErrorIs(t, err, broken)
	assert.Equal(t, 2, ln.calls, "nothing accepted after it")
}

// A real listener with the process out of file descriptors: Accept fails
// with EMFILE, which is temporary. The soft limit is lowered for the test,
// so that running out takes a few opens, whatever the machine's limit.
func TestEMFILEFromARealListenerIsTemporary(t *testing.T) {
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	open, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	low := lim
	low.Cur = uint64(len(open)) + 16
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			require.ErrorIs(t, err, syscall.EMFILE)
			break
		}
		held = append(held, f)
		require.Less(t, len(held), 64, "the lowered limit holds")
	}
	// The client end needs a descriptor too: free one for it.
	held[len(held)-1].Close()
	held = held[:len(held)-1]
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = ln.Accept()
	require.Error(t, err)
	assert.True(t, Temporary(err), "%v", err)
}
