package lbexp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/internal/serve"
)

// podServices is a backend that runs the agent's Redis and each balancer
// as Pods of their own (lbstack.KubeStack), as seed 004's deployment
// does, rather than beside the load generator in this process.
type podServices interface {
	Self() (string, error)
	Redis(ctx context.Context) (addr, password string, err error)
	Balancer(ctx context.Context, picker, feed, token string, args []string) (url string, stop func(), err error)
}

// RedisPasswordEnv holds the password of --redis, if it has one: a
// secret, so never a flag.
const RedisPasswordEnv = "RINGSIDE_REDIS_PASSWORD"

// store returns the agent's state store: Redis at --redis, else the
// backend's Redis Pod, else memory (nil); and its close.
func (l *Live) store(ctx context.Context, pods podServices, log *slog.Logger) (agent.Store, func(), error) {
	addr, password := l.redis, os.Getenv(RedisPasswordEnv)
	if addr == "" && pods != nil {
		var err error
		if addr, password, err = pods.Redis(ctx); err != nil {
			return nil, nil, err
		}
		log.Info("the agent keeps its state in the Redis Pod", "addr", addr)
	}
	if addr == "" {
		return nil, func() {}, nil
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	// A Pod's port may answer a moment before redis-server does.
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = rdb.Ping(ctx).Err(); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	return agent.NewRedisStore(rdb, fmt.Sprintf("ringside:lb-live:%d", time.Now().UnixNano())), func() { rdb.Close() }, nil
}

// serveAgent serves the agent's API and feed: on loopback, or on this
// runner's Pod IP where the balancers are Pods.
func serveAgent(h http.Handler, pods podServices) (*http.Server, string, error) {
	host := "127.0.0.1"
	if pods != nil {
		var err error
		if host, err = pods.Self(); err != nil {
			return nil, "", err
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, "", fmt.Errorf("the agent's address %s: %w", host, err)
	}
	srv := serve.Limit(&http.Server{Handler: h})
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String(), nil
}
