# One image for both roles: `latencytier manager` (runs as the non-root user
# below) and `latencytier agent` (the DaemonSet overrides the user to root and
# adds the privileges it documents). The binary is static and CGO-free; the
# BPF object is embedded by bpf2go, so no clang is needed here.
#
# The final stage is FROM scratch and holds exactly what `make release`
# builds without an engine (hack/release/release.sh, hack/image): /latencytier
# and an empty /tmp (1777), user 65532, the same labels, entrypoint and
# command; hack/release's TestDockerfileMatchesRelease keeps the two in step.
# Not distroless: its CA bundle, passwd and tzdata are nothing the binary
# reads (it talks only to the API server, with the service account's CA),
# and a base image would be a second source of the image's contents that no
# test here can pull.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY agent/ agent/
COPY controllers/ controllers/
COPY internal/ internal/
COPY main.go ./
ARG VERSION=dev
RUN install -d -m 1777 /rootfs/tmp && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /rootfs/latencytier .

FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title=latencytier \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /rootfs/ /
ENV PATH=/
USER 65532:65532
ENTRYPOINT ["/latencytier"]
CMD ["manager"]
