# syntax=docker/dockerfile:1
# The granary image: one static-enough binary (glibc only) on distroless, run as non-root.
#   docker build -t granary:dev .
# The same image runs `granary garden` and `granary seed` (deploy/garden, deploy/seed).

# --- build: the release binary (thin link-time optimisation) -------------------------
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and target dir between builds; the binary is copied out
# of the cached target dir in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin granary \
    && install -D -m 0755 target/release/granary /out/granary

# --- runtime: distroless with glibc, no shell, uid 65532 -----------------------------
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/granary /usr/local/bin/granary
USER 65532:65532
EXPOSE 8085
ENTRYPOINT ["/usr/local/bin/granary"]
