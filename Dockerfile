# One image for both roles: `latencytier manager` (runs as the non-root user
# below) and `latencytier agent` (the DaemonSet overrides the user to root and
# adds the privileges it documents). The binary is static and CGO-free; the
# BPF object is embedded by bpf2go, so no clang is needed here.
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
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/latencytier .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/latencytier /latencytier
USER 65532:65532
ENTRYPOINT ["/latencytier"]
CMD ["manager"]
