package kube

import (
	"context"
	"errors"
	"sync"
)

// Deploy starts the candidates of apps in ns, each replica an elector
// campaigning with alg on lock, and returns "ns/pod" → node. The process
// backend creates the Pods bound to nodes round-robin from offset and
// starts one elector process per replica, side by side as a Deployment's
// replicas start; the kind backend creates a Deployment per application
// (the overlay's, with the sidecar) and lets the scheduler spread it.
func (c *Cluster) Deploy(ctx context.Context, ns string, apps []App, offset int, alg, lock string, t Timing) (map[string]string, error) {
	if c.pods != nil {
		return c.pods.deploy(ctx, ns, apps, alg, lock, t)
	}
	podNode := map[string]string{}
	for _, app := range apps {
		pods, err := c.Pods(ctx, ns, app, offset)
		if err != nil {
			return nil, err
		}
		offset += app.Replicas
		for _, pn := range pods {
			podNode[ns+"/"+pn[0]] = pn[1]
		}
		errs := make([]error, len(pods))
		var wg sync.WaitGroup
		for i, pn := range pods {
			wg.Go(func() { errs[i] = c.Elect(ns, app.Name, pn[0], pn[1], alg, lock, t) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return podNode, nil
}
