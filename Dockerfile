# helixor-pack container image ([§10](docs/guides/kubernetes.md#s10)).
#
#   docker build -t helixor-pack:0.2.1 .
#   docker run --rm --read-only -p 8080:8080 \
#     -v /srv/helixor:/etc/helixor:ro helixor-pack:0.2.1
#
# where /srv/helixor holds helixor.yaml (listen: 0.0.0.0:8080; relative paths
# in it resolve against /etc/helixor) and the files it names.
#
# The image holds only the binary. The configuration, the license, the packs
# and the public keys are mounted at run time (see deploy/):
#   /etc/helixor/helixor.yaml               configuration (CMD below)
#   /etc/helixor/deployment/license.hxlic   license } one projected volume,
#   /etc/helixor/deployment/packs/*.hxpack  packs   } swapped together
#   /etc/helixor/deployment/packs/*.sig     their signatures }
#   /etc/helixor/issuer-keys/<key_id>.pub   issuer public keys
#   /etc/helixor/pack-signers/<key_id>.pub  pack signers' public keys
# Nothing is written inside the container, so it runs with a read-only root
# file system.

ARG RUST_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

# ---------------------------------------------------------------------------
# Build stage
# ---------------------------------------------------------------------------
FROM ${RUST_IMAGE} AS builder
WORKDIR /build

# 1. Dependencies only: the manifest, the lock file and empty stand-ins for
#    the crate's targets. This layer is rebuilt only when Cargo.toml or
#    Cargo.lock change, not on every source edit.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs \
 && echo '//! dependency-cache stub' > src/lib.rs \
 && echo 'fn main() {}' > benches/engine.rs \
 && cargo build --release --locked --bin helixor-pack \
 && rm -rf src benches \
      target/release/helixor-pack \
      target/release/deps/helixor* \
      target/release/deps/libhelixor* \
      target/release/.fingerprint/helixor*

# 2. The real sources. `touch` makes their modification times newer than the
#    stub build's so cargo always rebuilds the crate itself.
COPY assets ./assets
COPY src ./src
COPY benches ./benches
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin helixor-pack \
 && install -D -m 0755 target/release/helixor-pack /out/helixor-pack \
 && /out/helixor-pack --help > /dev/null

# ---------------------------------------------------------------------------
# Runtime stage: glibc + libgcc only, no shell, no package manager.
# ---------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}

ARG RUNTIME_IMAGE
ARG VERSION=0.2.1
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="helixor-pack" \
      org.opencontainers.image.description="Helixor pack runtime: signed licenses, sealed policy packs and an HTTP evaluation service" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${RUNTIME_IMAGE}"

# Owned by root, mode 0755 (set by `install` above): not writable by the
# process.
COPY --from=builder /out/helixor-pack /usr/local/bin/helixor-pack

# The distroless "nonroot" user, by number so that Kubernetes' runAsNonRoot
# can verify it without reading /etc/passwd.
USER 65532:65532

EXPOSE 8080

# No shell or curl in the image: the binary probes itself (exit 0 on HTTP 200).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["helixor-pack", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]

ENTRYPOINT ["helixor-pack"]
CMD ["serve", "--config", "/etc/helixor/helixor.yaml"]
