# The golang:1.26-bookworm of this machine: the debootstrapped base, git
# and certificates for the module proxy, and the host's Go toolchain
# (copied into the build context by build.sh). Same layout and environment
# as the official image.
FROM debian:bookworm-slim
ARG GO_VERSION
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
# The host's trust store: on a machine whose outbound HTTPS passes a
# proxy with its own CA, the module proxy is reached as the host reaches it.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY go /usr/local/go
ENV GOLANG_VERSION=${GO_VERSION} GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /go
# The standard library compiled once here, as every Go stage of the
# Dockerfile compiles it (the same GOFLAGS, -trimpath, no cgo: the same
# build-cache keys), where each stage compiled it for itself. GOFLAGS
# comes from build.sh, which reads it from the Dockerfile's Go stages.
ARG STD_GOFLAGS
RUN test -n "$STD_GOFLAGS" && GOFLAGS="$STD_GOFLAGS" GOGC=off GOMEMLIMIT=2GiB CGO_ENABLED=0 go build -trimpath std
