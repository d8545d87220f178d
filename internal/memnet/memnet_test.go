package memnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDialListenCutHeal(t *testing.T) {
	n := New()
	ctx := context.Background()
	a, b := n.Host("10.0.0.1:1"), n.Host("10.0.0.2:1")
	_, err := a.Listen("10.0.0.9:1")
	require.ErrorContains(t, err, "not this host's address")
	ln, err := b.Listen("10.0.0.2:1")
	require.NoError(t, err)
	_, err = b.Listen("10.0.0.2:1")
	require.ErrorContains(t, err, "already in use")
	assert.Equal(t, "10.0.0.2:1", ln.Addr().String())

	_, err = a.DialContext(ctx, "10.0.0.3:1")
	require.ErrorContains(t, err, "refused", "nobody listens there")

	c, err := a.DialContext(ctx, "10.0.0.2:1")
	require.NoError(t, err)
	s, err := ln.Accept()
	require.NoError(t, err)
	go c.Write([]byte("ping"))
	buf := make([]byte, 4)
	_, err = io.ReadFull(s, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf))

	// A cut closes the connections between the two and refuses new ones,
	// in both directions; other hosts are untouched.
	n.Cut("10.0.0.2:1", "10.0.0.1:1")
	_, err = s.Read(buf)
	assert.Error(t, err, "the accepted end sees the cut")
	_, err = a.DialContext(ctx, "10.0.0.2:1")
	require.ErrorContains(t, err, "refused")
	other, err := n.Host("10.0.0.3:1").DialContext(ctx, "10.0.0.2:1")
	require.NoError(t, err)
	other.Close()
	n.Heal("10.0.0.1:1", "10.0.0.2:1")
	c, err = a.DialContext(ctx, "10.0.0.2:1")
	require.NoError(t, err)
	c.Close()

	// A closed listener frees its address and refuses dials; the
	// connections it never accepted are closed.
	require.NoError(t, ln.Close())
	_, err = a.DialContext(ctx, "10.0.0.2:1")
	require.ErrorContains(t, err, "refused")
	_, err = ln.Accept()
	assert.ErrorIs(t, err, net.ErrClosed)
	ln2, err := b.Listen("10.0.0.2:1")
	require.NoError(t, err)
	ln2.Close()
}

// A connection behaves as a socket's: a write returns once buffered (two
// ends may write to each other before either reads), a deadline set and
// then cleared does not fire, an expired one times out as net.Error, and
// a closed end gives its peer what was sent, then EOF.
func TestPipeConnIsSocketLike(t *testing.T) {
	a, b := newPipeConn("a:1", "b:1")
	_, err := a.Write([]byte("from a"))
	require.NoError(t, err)
	_, err = b.Write([]byte("from b"))
	require.NoError(t, err, "no reader yet, and the write returned")
	buf := make([]byte, 6)
	_, err = io.ReadFull(b, buf)
	require.NoError(t, err)
	assert.Equal(t, "from a", string(buf))

	require.NoError(t, a.SetReadDeadline(time.Now().Add(-time.Second)))
	require.NoError(t, a.SetReadDeadline(time.Time{}))
	_, err = io.ReadFull(a, buf)
	require.NoError(t, err, "a cleared deadline does not fire")
	assert.Equal(t, "from b", string(buf))

	require.NoError(t, a.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err = a.Read(buf)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	require.NoError(t, a.SetReadDeadline(time.Time{}))

	// A full buffer blocks the writer until its deadline.
	require.NoError(t, a.SetWriteDeadline(time.Now().Add(50*time.Millisecond)))
	_, err = a.Write(make([]byte, bufSize+1))
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())

	_, err = b.Write([]byte("bye"))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	got, err := io.ReadAll(a)
	require.NoError(t, err, "EOF after what was sent")
	assert.Equal(t, "bye", string(got))
	_, err = a.Write([]byte("x"))
	assert.Error(t, err, "the peer is gone")
	_, err = b.Read(buf)
	assert.ErrorIs(t, err, net.ErrClosed)
}
