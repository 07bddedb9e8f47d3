# pgowl needs cgo: pg_query_go compiles PostgreSQL's parser in C.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/pgowl ./cmd/pgowl \
 && sed 's/^listen: .*/listen: 0.0.0.0:6432/' config/example.yaml > /out/pgowl.yaml

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates postgresql-client \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin pgowl
COPY --from=build /out/pgowl /usr/local/bin/pgowl
# A starting configuration that listens on all interfaces; mount your own over it.
COPY --from=build /out/pgowl.yaml /etc/pgowl/pgowl.yaml
USER pgowl
EXPOSE 6432
# Healthy when pgowl answers the PostgreSQL protocol (pg_isready needs no credentials).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD pg_isready -h 127.0.0.1 -p 6432 -q -t 2 || exit 1
ENTRYPOINT ["pgowl"]
CMD ["serve", "--config", "/etc/pgowl/pgowl.yaml"]
