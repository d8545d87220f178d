package lbstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
)

// RedisImageEnv names the Redis image of the stack's Redis Pod (the
// compose stack's REDIS_IMAGE): redis:7-bookworm unless set, which make
// base-images builds here and make kind-experiments loads into kind.
const RedisImageEnv = "RINGSIDE_REDIS_IMAGE"

// The Secret holding what the stack's Pods must not see on a command
// line: Redis's password and the agent's feed token.
const (
	stackSecret   = "lb-live"
	keyRedisPass  = "redis-password"
	keyAgentToken = "agent-token"
	balancerPort  = 8080
	balancerAdmin = 9090
)

// Redis runs redis-server as a Pod of the stack — its password from the
// stack's Secret, through a config file as the compose stack passes it —
// and returns its address and password once it answers on its port.
func (k *KubeStack) Redis(ctx context.Context) (addr, password string, err error) {
	password = ringnodes.NewSecret()
	if err := k.putSecret(ctx, keyRedisPass, password); err != nil {
		return "", "", err
	}
	image := os.Getenv(RedisImageEnv)
	if image == "" {
		image = "redis:7-bookworm"
	}
	no := false
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "redis", Labels: map[string]string{"app": "redis"}},
		Spec: v1.PodSpec{
			AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
			Containers: []v1.Container{{
				Name: "redis", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", `umask 077; printf 'requirepass %s\n' "$REDIS_PASSWORD" > /tmp/redis.conf && ` +
					`exec redis-server /tmp/redis.conf --save '' --appendonly no --protected-mode no`},
				Env:            []v1.EnvVar{secretEnv("REDIS_PASSWORD", keyRedisPass)},
				Ports:          []v1.ContainerPort{{Name: "redis", ContainerPort: 6379}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(6379)}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := k.cs.CoreV1().Pods(k.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("kubernetes backend: the Redis Pod: %w", err)
	}
	ip, err := k.readyPod(ctx, "app=redis")
	if err != nil {
		return "", "", fmt.Errorf("kubernetes backend: the Redis Pod (image %s; set $%s for another): %w", image, RedisImageEnv, err)
	}
	return net.JoinHostPort(ip, "6379"), password, nil
}

// Balancer runs cmd/balancer (the runner image's /balancer) with picker
// and args as a Deployment of one Pod, fed by the agent at feed with token, and
// returns its proxy's URL once the Pod is ready and has the agent's
// weights; stop deletes the Deployment and waits for its Pod to go, so
// that the next balancer runs alone.
func (k *KubeStack) Balancer(ctx context.Context, picker, feed, token string, args []string) (url string, stop func(), err error) {
	if err := k.putSecret(ctx, keyAgentToken, token); err != nil {
		return "", nil, err
	}
	name := "balancer-" + picker
	lbl := map[string]string{"app": "balancer", "ringside.io/picker": picker}
	one, no, user := int32(1), false, int64(65532)
	env := []v1.EnvVar{
		{Name: "BALANCER_ADDR", Value: ":" + strconv.Itoa(balancerPort)},
		{Name: "BALANCER_ADMIN", Value: ":" + strconv.Itoa(balancerAdmin)},
		{Name: "BALANCER_PICKER", Value: picker},
		{Name: "BALANCER_NAME", Value: "lb-live"},
		{Name: "BALANCER_LOG", Value: "warn"},
		{Name: "AGENT_FEED", Value: feed},
		secretEnv("AGENT_TOKEN", keyAgentToken),
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
					SecurityContext: &v1.PodSecurityContext{RunAsUser: &user, RunAsNonRoot: new(true)},
					Containers: []v1.Container{{
						Name: "balancer", Image: ringnodes.RunnerImage(), ImagePullPolicy: v1.PullIfNotPresent,
						Command: []string{"/balancer"}, Args: args, Env: env,
						Ports: []v1.ContainerPort{{Name: "http", ContainerPort: balancerPort}, {Name: "admin", ContainerPort: balancerAdmin}},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz",
							Port: intstr.FromInt(balancerAdmin)}}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
	deployments := k.cs.AppsV1().Deployments(k.ns)
	if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return "", nil, fmt.Errorf("kubernetes backend: the balancer's Deployment: %w", err)
	}
	selector := "app=balancer,ringside.io/picker=" + picker
	stop = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		fg := metav1.DeletePropagationForeground
		if err := deployments.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
			return
		}
		// Gone means the Deployment too: a foreground delete keeps it
		// until its Pods are gone, and the next cell's Deployment of the
		// same name was refused ("object is being deleted") in that gap.
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if _, err := deployments.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			pods, err := k.cs.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			return err == nil && len(pods.Items) == 0, nil
		})
	}
	ip, err := k.readyPod(ctx, selector)
	if err == nil {
		err = weighted(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(balancerAdmin))+"/metrics")
	}
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("kubernetes backend: balancer %s: %w", picker, err)
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(balancerPort)), stop, nil
}

// weighted waits until the balancer's metrics show a worker of weight
// above zero: the agent's feed has reached it.
func weighted(ctx context.Context, metrics string) error {
	last := fmt.Errorf("no weighted worker in %s yet", metrics)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil { // the wait's own end says nothing of the balancer
				last = err
			}
			return false, nil
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mf, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			last = fmt.Errorf("%s: %w", metrics, err)
			return false, nil
		}
		for _, m := range mf["balancer_worker_weight"].GetMetric() {
			if m.GetGauge().GetValue() > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no weights from the agent: %w (%w)", last, err)
	}
	return nil
}

// readyPod waits for a ready Pod of the stack matching selector and
// returns its IP.
func (k *KubeStack) readyPod(ctx context.Context, selector string) (string, error) {
	ip, err := ringnodes.ReadyPod(ctx, k.cs, k.ns, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "", err
	}
	return ip.String(), nil
}

// putSecret sets key of the stack's Secret, creating it on first use.
func (k *KubeStack) putSecret(ctx context.Context, key, value string) error {
	secrets := k.cs.CoreV1().Secrets(k.ns)
	s, err := secrets.Get(ctx, stackSecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: stackSecret},
			StringData: map[string]string{key: value}}, metav1.CreateOptions{})
	case err == nil:
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[key] = []byte(value)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubernetes backend: the stack's Secret: %w", err)
	}
	return nil
}

func secretEnv(name, key string) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: stackSecret}, Key: key}}}
}
