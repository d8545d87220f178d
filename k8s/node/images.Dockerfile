# The images a kubeadm node runs, one target each, from binaries built on
# the host (build.sh puts them in the context): the control plane FROM
# scratch, kube-proxy and podnet on Debian for iptables and iproute2.
# build.sh tags each with the name kubeadm expects
# (`kubeadm config images list`) and saves them into the node image.
ARG BASE_IMAGE=debian:bookworm-slim

FROM scratch AS static
ENV PATH=/usr/local/bin:/usr/bin:/bin

FROM static AS kube-apiserver
COPY kube-apiserver /usr/local/bin/kube-apiserver
ENTRYPOINT ["/usr/local/bin/kube-apiserver"]

FROM static AS kube-controller-manager
COPY kube-controller-manager /usr/local/bin/kube-controller-manager
ENTRYPOINT ["/usr/local/bin/kube-controller-manager"]

FROM static AS kube-scheduler
COPY kube-scheduler /usr/local/bin/kube-scheduler
ENTRYPOINT ["/usr/local/bin/kube-scheduler"]

FROM static AS etcd
COPY etcd /usr/local/bin/etcd
ENTRYPOINT ["/usr/local/bin/etcd"]

FROM static AS pause
COPY pause /pause
ENTRYPOINT ["/pause"]

FROM static AS coredns
COPY coredns /coredns
ENTRYPOINT ["/coredns"]

FROM ${BASE_IMAGE} AS kube-proxy
RUN apt-get update && apt-get install -y --no-install-recommends iptables conntrack ipset kmod \
 && rm -rf /var/lib/apt/lists/*
COPY kube-proxy /usr/local/bin/kube-proxy
ENTRYPOINT ["/usr/local/bin/kube-proxy"]

# The pod network's agent (default-cni.yaml): routes to every node's pod
# range and the node's bridge CNI config.
FROM ${BASE_IMAGE} AS podnet
RUN apt-get update && apt-get install -y --no-install-recommends iproute2 \
 && rm -rf /var/lib/apt/lists/*
COPY podnet /usr/local/bin/podnet
ENTRYPOINT ["/usr/local/bin/podnet"]
