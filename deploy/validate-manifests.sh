#!/usr/bin/env bash
# Validates every Kubernetes manifest under deploy/ offline, against the API schemas bundled in
# PyPI's kubernetes-validate: strict (an unknown or misspelt field is an error), document by
# document (the tool splits multi-document files at `---`), for Kubernetes 1.31 (the oldest
# these manifests target: Job podFailurePolicy is GA there, backoffLimitPerIndex on by
# default) and 1.37 (the newest this kubernetes-validate bundles). .ci/run runs it; so can you:
#   deploy/validate-manifests.sh
# The venv is made once, beside the CI's other tool venvs (override: RECON_K8S_VALIDATE_VENV).
set -euo pipefail
cd "$(dirname "$0")/.."

version=1.37.0
venv="${RECON_K8S_VALIDATE_VENV:-/var/tmp/recon-k8s-validate}"
if [ "$("$venv/bin/kubernetes-validate" --version 2>/dev/null)" != "$version" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$version"
fi

mapfile -t files < <(find deploy -name '*.yaml' -o -name '*.yml' | sort)
[ "${#files[@]}" -gt 0 ] || { echo "no manifests under deploy/" >&2; exit 1; }

status=0
out=$("$venv/bin/kubernetes-validate" --strict -k 1.31.0 -k 1.37.0 "${files[@]}" 2>&1) || status=$?
echo "$out"
# kubernetes-validate only warns (exit 0) about a resource it has no schema for: a misspelt
# `kind` or `apiVersion` would pass. Anything but an INFO line fails here.
if grep -v '^INFO ' <<<"$out" | grep -q .; then
    status=1
fi
# Every file must hold at least one resource that passed (an empty file validates nothing).
for f in "${files[@]}"; do
    grep -q "^INFO $f passed" <<<"$out" || { echo "ERROR $f: no resource validated"; status=1; }
done
if [ "$status" -ne 0 ]; then
    echo "deploy/validate-manifests.sh: the manifests above do not validate" >&2
fi
exit "$status"
