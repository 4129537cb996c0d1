# Static ferry binary on a distroless base, running as a non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ferry ./cmd/ferry

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ferry /ferry
USER nonroot:nonroot
# Cloud Run sets $PORT; ferry serves /metrics, /healthz and /readyz there.
EXPOSE 8080
ENTRYPOINT ["/ferry", "run", "-c", "/etc/ferry/ferry.yaml"]
