# syntax=docker/dockerfile:1
# The memcached hook and the agent (memcached-agent, the configuration
# endpoint a Memcached with spec.discovery runs): two static Go binaries on
# distroless, running as non-root. The image runs the hook; the agent's
# Deployment sets command: [/memcached-agent].
#
#   make image IMAGE=REGISTRY/memcached-hook:TAG     (sets VERSION and COMMIT)
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.2.0 --build-arg COMMIT=$(git rev-parse HEAD) -t REGISTRY/memcached-hook:TAG .
#
# Both base images are pinned by digest, so that a rebuild of a commit gives
# the same image. To move them: docker buildx imagetools inspect IMAGE:TAG
# (or crane digest IMAGE:TAG), and put the index digest here.

# The build stage runs on the builder's own platform and cross-compiles for
# the target one (pure Go, CGO off), so a multi-arch build never emulates
# the compiler. The exact Go of go.mod: the golang images set
# GOTOOLCHAIN=local.
FROM --platform=$BUILDPLATFORM golang:1.26.8@sha256:6c2a5538f964f1c82f97ad14988bf05de100d922d159d0e398b54c7b0ca0c6c9 AS build
WORKDIR /src
# Dependencies first, in their own layer: rebuilt only when go.mod or go.sum
# change.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY sync/ sync/
ARG TARGETOS TARGETARCH
ARG VERSION=devel
ARG COMMIT=unknown
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags="-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/ ./cmd/memcached-hook ./cmd/memcached-agent

# gcr.io/distroless/static-debian12:nonroot as of 2026-08-26.
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/memcached-hook /memcached-hook
COPY --from=build /out/memcached-agent /memcached-agent
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/memcached-hook"]
# In a container, every interface of its own network namespace; the binary
# alone defaults to loopback.
CMD ["--listen-address=:8080"]
