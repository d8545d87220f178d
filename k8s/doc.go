// Package k8s holds ringside's Kubernetes manifests (DESIGN §3.6): a kind
// cluster shaped like the BLD paper's, and a kustomize base with one
// overlay per election algorithm and least-privilege RBAC for the elector
// sidecar. Its tests render every overlay with kustomize and run the
// electors on a real API server with exactly the ServiceAccount's rights.
package k8s
