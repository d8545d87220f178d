package kube

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubernetes backend learns what its electors do from their logs:
// every Pod's elector container, followed from its first line.

// watch follows the Pods of ns and reads the elector log of each from
// its start — a replacement Pod's too.
func (r *podRunner) watch(ns string) {
	r.mu.Lock()
	if r.cancel[ns] != nil {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel[ns] = cancel
	r.mu.Unlock()
	go func() {
		for ctx.Err() == nil {
			list, err := r.c.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range list.Items {
					if started(&p) {
						r.stream(ctx, ns, p.Name)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

func started(p *v1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "elector" && (s.State.Running != nil || s.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// stream reads pod's elector log once, from its first line.
func (r *podRunner) stream(ctx context.Context, ns, pod string) {
	key := ns + "/" + pod
	r.mu.Lock()
	if r.streamed[key] {
		r.mu.Unlock()
		return
	}
	r.streamed[key] = true
	ended := make(chan struct{})
	r.ended[key] = ended
	logDir := r.logDir
	r.mu.Unlock()
	go func() {
		defer close(ended)
		rc, err := r.c.CS.CoreV1().Pods(ns).GetLogs(pod, &v1.PodLogOptions{Container: "elector", Follow: true}).Stream(ctx)
		if err != nil {
			return
		}
		defer rc.Close()
		var keep *bufio.Writer
		if logDir != "" {
			f, err := os.Create(filepath.Join(logDir, ns+"_"+pod+".log"))
			if err != nil {
				slog.Warn("kubernetes backend: an elector's log is not kept", "pod", key, "err", err)
			} else {
				defer f.Close()
				keep = bufio.NewWriter(f)
				defer keep.Flush()
			}
		}
		sc := bufio.NewScanner(rc)
		for sc.Scan() {
			if keep != nil {
				keep.Write(sc.Bytes())
				keep.WriteByte('\n')
			}
			if e, ok := parseEvent(sc.Bytes(), ns); ok {
				r.c.record(e)
			}
		}
	}()
}
