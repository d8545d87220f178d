package kube

import (
	"errors"

	"k8s.io/client-go/tools/clientcmd"
)

// ProxiedKubeconfig writes a copy of kubeconfig whose every cluster is
// reached through proxy, to path.
func ProxiedKubeconfig(kubeconfig, path string, proxy string) error {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return err
	}
	if len(cfg.Clusters) == 0 {
		return errors.New("kubeconfig names no cluster")
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + proxy
	}
	return clientcmd.WriteToFile(*cfg, path)
}
