// Package k8s holds ringside's Kubernetes manifests (DESIGN §3.6): a kind
// cluster shaped like the BLD paper's, the recipe of a kind node image
// built with no registry (node/), and a kustomize base with one overlay
// per election algorithm and least-privilege RBAC for the elector sidecar.
// Render and Applications turn an overlay into the objects of N
// applications. Its tests render every overlay, run the electors on a real
// API server with exactly their ServiceAccount's rights, and run three
// applications in real Pods on a kind cluster.
package k8s
