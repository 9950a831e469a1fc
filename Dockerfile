# trawl in a container: a release build on Debian, run as an unprivileged user.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin trawl

FROM debian:bookworm-slim
# chromium for the browse pool (render, browse jobs, sessions); util-linux for setpriv, which
# ties the browser's life to its worker.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates chromium \
    util-linux \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/trawl trawl
COPY --from=build /src/target/release/trawl /usr/local/bin/trawl
USER trawl
WORKDIR /var/lib/trawl
ENTRYPOINT ["trawl"]
