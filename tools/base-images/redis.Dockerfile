# The redis:7-bookworm of this machine: Debian bookworm's Redis 7 on the
# debootstrapped base. The official image runs the same command line.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
