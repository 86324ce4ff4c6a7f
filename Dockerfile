# syntax=docker/dockerfile:1
# The memcached hook: a static Go binary on distroless, running as non-root.
#   docker build -t REGISTRY/memcached-hook:TAG .
# The exact Go of go.mod: the golang images set GOTOOLCHAIN=local.
FROM golang:1.26.8 AS build
WORKDIR /src
# Dependencies first, in their own layer: rebuilt only when go.mod or go.sum
# change.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY sync/ sync/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/memcached-hook ./cmd/memcached-hook

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/memcached-hook /memcached-hook
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/memcached-hook"]
