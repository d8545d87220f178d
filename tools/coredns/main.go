// Command coredns is CoreDNS v1.11.3 with the plugins a kubeadm cluster's
// Corefile names (and log, for debugging), for the kind node image.
//
// CoreDNS's own main links every plugin it ships — the AWS, Azure and
// Google Cloud DNS back ends and the Datadog tracer among them — which was
// about four fifths of the packages its build compiled; a kind cluster runs
// none of them. CoreDNS supports exactly this: a main of one's own that
// imports the plugins it wants and sets dnsserver.Directives to them, in
// the order of CoreDNS's plugin.cfg (core/dnsserver/zdirectives.go), which
// decides how a query passes through them.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins of the Corefile kubeadm v1.32 writes
	// (cmd/kubeadm/app/phases/addons/dns), and log.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is plugin.cfg's order, less the plugins not linked.
var directives = []string{
	"reload",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
	"loop",
	"forward",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
