# loadledger services and loadctl on Debian 12, built from this checkout (docker-compose.yml
# builds it as loadledger:latest). BASE_IMAGE: another Debian 12 image where no registry is
# reachable (scripts/compose-check.sh passes its debootstrap stand-in).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      librdkafka-dev libpq-dev libavro-dev uuid-dev libcurl4-openssl-dev libssl-dev libjansson-dev libncurses-dev libmicrohttpd-dev \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLL_BUILD_TESTS=OFF \
      -DCMAKE_INSTALL_PREFIX=/usr/local && cmake --build /build -j"$(nproc)" && cmake --install /build

# ca-certificates: the dispatcher's HTTP sink over TLS; curl: the compose healthcheck (/readyz).
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends librdkafka1 libpq5 libavro23 \
      libuuid1 libcurl4 libjansson4 libncursesw6 libmicrohttpd12 ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local /usr/local
USER nobody
