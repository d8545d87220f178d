package incluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/experiments/backend/lbstack"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
)

// Options configure one in-cluster run.
type Options struct {
	Config *rest.Config
	Image  string // the runner image, loaded in the cluster (default ringnodes.DefaultRunnerImage)
	// RedisImage is lb-live's Redis Pod's (default: lbstack's own).
	RedisImage string
	Args       []string // the ringside command line the Job runs: run EXPERIMENT|all [flags]
	Out        string   // the host's results folder
	// Timeout bounds the Job (its activeDeadlineSeconds).
	Timeout time.Duration
	Log     io.Writer // the runner's log is copied here
}

// rules are the runner's rights: it makes a namespace per ring and the
// ring's Secret, headless Service and StatefulSet in it, scales it, reads
// its Pods and their logs, and describes the cluster for meta.json; for
// lb-live, the agent's: worker Deployments made and scaled, a sundown
// Pod's deletion cost and a throttled Pod's CPU patched, the kubelets'
// figures read through the node proxy; and a Redis Pod, a balancer
// Deployment per picker and the Secret they read.
// Kubernetes cannot grant rights only in the namespaces one creates, so
// they are cluster-wide, and end with the run.
var rules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "delete", "get"}},
	{APIGroups: []string{""}, Resources: []string{"secrets", "services"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{""}, Resources: []string{"pods", "pods/resize"}, Verbs: []string{"patch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "get"}},
	{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "get", "list", "delete", "deletecollection"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"get", "update"}},
	{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"create", "get"}},
	{APIGroups: []string{"apps"}, Resources: []string{"statefulsets/scale"}, Verbs: []string{"get", "update"}},
	{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"list"}},
}

// Run runs o.Args in a Job on the cluster and copies its results to
// o.Out. Everything it made is deleted at the end, or when ctx ends.
func Run(ctx context.Context, o Options) (err error) {
	if len(o.Args) == 0 {
		return errors.New("cluster: no ringside command line to run")
	}
	if o.Image == "" {
		o.Image = ringnodes.DefaultRunnerImage
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Hour
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	ns, err := ringnodes.CreateNamespace(ctx, cs, "ringside-runner")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() {
		if cerr := cleanup(context.WithoutCancel(ctx), cs, ns); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := grant(ctx, cs, ns); err != nil {
		return err
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job(o), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: job: %w", err)
	}
	pod, err := runnerPod(ctx, cs, ns)
	if err != nil {
		return err
	}
	if o.Log != nil {
		// The log is copied until Run returns, never after.
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			follow(fctx, cs, ns, pod, o.Log)
		}()
		defer func() { stop(); <-done }()
	}
	st, err := waitDone(ctx, cs, ns, pod, o.Timeout)
	if err != nil {
		return err
	}
	if err := fetch(ctx, cs, ns, pod, o.Out); err != nil {
		return err
	}
	if st.Error != "" {
		return fmt.Errorf("cluster: the run failed (results so far copied to %s): %s", o.Out, st.Error)
	}
	return nil
}

func grant(ctx context.Context, cs kubernetes.Interface, ns string) error {
	meta := metav1.ObjectMeta{Name: ns, Labels: map[string]string{kube.NamespaceLabel: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: service account: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: cluster role: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "runner", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster: cluster role binding: %w", err)
	}
	return nil
}

func job(o Options) *batchv1.Job {
	var zero int32
	deadline := int64(o.Timeout.Seconds())
	// The runner gets time to delete its rings' namespaces when the host
	// deletes its own (Ctrl-C).
	grace := int64(30)
	nonRoot, no := int64(65532), false
	args := append([]string{"job", "--dir", "/results", "--"}, o.Args...)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "runner"},
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero, ActiveDeadlineSeconds: &deadline,
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "ringside-runner"}},
				Spec: v1.PodSpec{
					ServiceAccountName: "runner", RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
					EnableServiceLinks: &no,
					Containers: []v1.Container{{
						Name: "runner", Image: o.Image, ImagePullPolicy: v1.PullIfNotPresent,
						Command: []string{"/ringside"}, Args: args,
						Env: []v1.EnvVar{{Name: ringnodes.RunnerImageEnv, Value: o.Image},
							{Name: lbstack.RedisImageEnv, Value: o.RedisImage},
							{Name: ringnodes.OwnerEnv, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: lbstack.PodIPEnv, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
						Ports: []v1.ContainerPort{{Name: "results", ContainerPort: JobPort}},
						SecurityContext: &v1.SecurityContext{RunAsUser: &nonRoot, RunAsNonRoot: new(true), AllowPrivilegeEscalation: &no,
							Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}}},
						// The image is FROM scratch: no /tmp of its own.
						VolumeMounts: []v1.VolumeMount{{Name: "results", MountPath: "/results"}, {Name: "tmp", MountPath: "/tmp"}},
					}},
					Volumes: []v1.Volume{{Name: "results", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// runnerPod waits for the Job's Pod to run and returns its name.
func runnerPod(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	var name, last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=runner"})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		p := &list.Items[0]
		name, last = p.Name, ringnodes.PodState(p)
		return p.Status.Phase != v1.PodPending, nil
	})
	if err != nil {
		return "", fmt.Errorf("cluster: the runner's Pod did not start in 3 minutes (%s); is the image loaded in the cluster? %w", last, err)
	}
	return name, nil
}

// follow copies the runner's log to w as it is written.
func follow(ctx context.Context, cs kubernetes.Interface, ns, pod string, w io.Writer) {
	rc, err := cs.CoreV1().Pods(ns).GetLogs(pod, &v1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		fmt.Fprintf(w, "cluster: following the runner's log: %v\n", err)
		return
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(w, "%s\n", sc.Bytes())
	}
}

// waitDone polls the Job's status until the run is done, or its Pod
// ended without saying so.
func waitDone(ctx context.Context, cs kubernetes.Interface, ns, pod string, limit time.Duration) (Status, error) {
	var st Status
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, limit, true, func(ctx context.Context) (bool, error) {
		raw, err := cs.CoreV1().Pods(ns).ProxyGet("http", pod, strconv.Itoa(JobPort), "/status", nil).DoRaw(ctx)
		if err == nil {
			if err := json.Unmarshal(raw, &st); err != nil {
				return false, fmt.Errorf("cluster: the runner's status %.200q: %w", raw, err)
			}
			if st.Done {
				return true, nil
			}
		}
		p, perr := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if perr == nil && (p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded) {
			return false, fmt.Errorf("cluster: the runner's Pod %s/%s ended (%s) before its results were copied (%v)", ns, pod, p.Status.Phase, err)
		}
		return false, nil
	})
	return st, err
}

func fetch(ctx context.Context, cs kubernetes.Interface, ns, pod, out string) error {
	rc, err := cs.CoreV1().Pods(ns).ProxyGet("http", pod, strconv.Itoa(JobPort), "/results.tar", nil).Stream(ctx)
	if err != nil {
		return fmt.Errorf("cluster: fetching the results: %w", err)
	}
	defer rc.Close()
	if _, err := Unpack(rc, out, MaxResults); err != nil {
		return fmt.Errorf("cluster: results: %w", err)
	}
	return nil
}

// cleanup deletes the run's namespace; the runner, told to stop,
// deletes its rings' namespaces while it still has the rights to, and
// those it could not are swept by their owner label; then the run's
// cluster-wide role and binding go.
func cleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	errs := []error{ignoreNotFound(cs.CoreV1().Namespaces().Delete(ctx, ns, del))}
	// The runner's Pod gone (or 45 s passed): whatever it did not delete
	// is swept below.
	wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=runner"})
		return err != nil || len(list.Items) == 0, nil
	})
	owned, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: ringnodes.OwnerLabel + "=" + ns})
	errs = append(errs, err)
	if err == nil {
		for _, o := range owned.Items {
			errs = append(errs, ignoreNotFound(cs.CoreV1().Namespaces().Delete(ctx, o.Name, del)))
		}
	}
	errs = append(errs,
		ignoreNotFound(cs.RbacV1().ClusterRoleBindings().Delete(ctx, ns, del)),
		ignoreNotFound(cs.RbacV1().ClusterRoles().Delete(ctx, ns, del)))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: cleaning up %s: %w", ns, err)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
