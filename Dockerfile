# Static ferry binary on a distroless base, running as a non-root user.
FROM golang:1.26 AS build
WORKDIR /src
# The daemon is its own module (cmd/ferry) that requires the library and
# the sink modules beside it at their release version: build it from the
# whole tree, in the workspace (go.work), which resolves each of them to
# its directory (a released version also builds outside it:
# go install github.com/ferry-io/ferry/cmd/ferry@vX.Y.Z).
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ferry ./cmd/ferry

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ferry /ferry
USER nonroot:nonroot
# ferry serves /metrics, /healthz, /readyz, /status and the status page (/)
# on its listen: address, or on
# $PORT when that is set (Cloud Run sets it for the ingress container only).
EXPOSE 8080
ENTRYPOINT ["/ferry", "run", "-c", "/etc/ferry/ferry.yaml"]
