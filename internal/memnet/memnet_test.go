package memnet

import (
	"context"
	"io"
	"net"
	"testing"

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
