# pgowl needs cgo: pg_query_go compiles PostgreSQL's parser in C.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/pgowl ./cmd/pgowl \
 && sed 's/^listen: .*/listen: 0.0.0.0:6432/' config/example.yaml > /out/pgowl.yaml \
 && printf 'admin:\n  listen: 0.0.0.0:6480\n' >> /out/pgowl.yaml

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin pgowl
COPY --from=build /out/pgowl /usr/local/bin/pgowl
# A starting configuration that listens on all interfaces; mount your own over it.
COPY --from=build /out/pgowl.yaml /etc/pgowl/pgowl.yaml
USER pgowl
# 6432: PostgreSQL clients (and the admin console, database pgowl); 6480: the admin HTTP
# listener (/metrics, /healthz, /readyz, /history, the status page).
EXPOSE 6432 6480
# Healthy when pgowl can route: a primary is known and reads have a node (/readyz).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD curl -fsS -o /dev/null --max-time 2 http://127.0.0.1:6480/readyz || exit 1
ENTRYPOINT ["pgowl"]
CMD ["serve", "--config", "/etc/pgowl/pgowl.yaml"]
