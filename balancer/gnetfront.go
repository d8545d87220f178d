package balancer

import (
	"bufio"
	"bytes"
	"context"
	"net"

	"github.com/panjf2000/gnet/v2"
	"github.com/valyala/fasthttp"
)

// GnetFront is a measurement prototype, not a front to deploy: gnet's
// event loop for the clients, each request handed to a goroutine that runs
// FastFront's handler (pick, the worker's HostClient) and written back
// with AsyncWrite. It serves only what lb-proxy sends — requests without
// a body, not pipelined — so what it measures is an upper bound on a
// complete gnet front.
type GnetFront struct {
	gnet.BuiltinEventEngine
	B    *Balancer
	Addr string

	fast *FastFront
	eng  gnet.Engine
}

type gnetConn struct {
	ctx  fasthttp.RequestCtx
	busy bool
	rd   bytes.Reader
	br   *bufio.Reader
	out  bytes.Buffer
	bw   *bufio.Writer
}

// addrConn gives fasthttp a connection's addresses, read once on the
// event loop (gnet's are not safe elsewhere).
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (a addrConn) LocalAddr() net.Addr  { return a.local }
func (a addrConn) RemoteAddr() net.Addr { return a.remote }

func (g *GnetFront) ListenAndServe() error {
	g.fast = &FastFront{B: g.B}
	return gnet.Run(g, "tcp://"+g.Addr, gnet.WithMulticore(true))
}

func (g *GnetFront) Shutdown(ctx context.Context) error { return g.eng.Stop(ctx) }

func (g *GnetFront) OnBoot(e gnet.Engine) gnet.Action {
	g.eng = e
	return gnet.None
}

func (g *GnetFront) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	st := &gnetConn{}
	st.ctx.Init2(addrConn{local: c.LocalAddr(), remote: c.RemoteAddr()}, fastLogger{g.B}, false)
	st.br = bufio.NewReaderSize(&st.rd, 4096)
	st.bw = bufio.NewWriterSize(&st.out, 4096)
	c.SetContext(st)
	return nil, gnet.None
}

var headEnd = []byte("\r\n\r\n")

func (g *GnetFront) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*gnetConn)
	if st.busy {
		return gnet.None
	}
	buf, _ := c.Peek(-1)
	end := bytes.Index(buf, headEnd)
	if end < 0 {
		if len(buf) > defaultHeadBytes {
			return gnet.Close
		}
		return gnet.None
	}
	st.ctx.Request.Reset()
	st.ctx.Response.Reset()
	st.rd.Reset(buf[:end+4])
	st.br.Reset(&st.rd)
	if err := st.ctx.Request.Header.Read(st.br); err != nil || st.ctx.Request.Header.ContentLength() > 0 || st.ctx.Request.Header.ContentLength() == -1 {
		return gnet.Close // the prototype serves body-less requests only
	}
	c.Discard(end + 4)
	st.busy = true
	go func() {
		g.fast.handle(&st.ctx)
		st.out.Reset()
		st.bw.Reset(&st.out)
		st.ctx.Response.Write(st.bw)
		st.bw.Flush()
		closing := st.ctx.Response.ConnectionClose()
		c.AsyncWrite(st.out.Bytes(), func(c gnet.Conn, err error) error {
			st.busy = false
			if err != nil || closing {
				return c.Close()
			}
			if c.InboundBuffered() > 0 && g.OnTraffic(c) == gnet.Close {
				return c.Close()
			}
			return nil
		})
	}()
	return gnet.None
}
