#!/usr/bin/env bash
# Prints the Job that re-runs shard INDEX of the night DATE (deploy/k8s/rerun/shard-index.yaml
# with the index, the night and a name made of both), for `kubectl create -f -`:
#   deploy/k8s/rerun/rerun.sh 2 2026-12-02 | kubectl create -f -
# The shard count is the template's (= recon-shards.yaml's); GROUP (default: DATE) names another
# run group.
set -euo pipefail
here="$(dirname "$0")"
index="${1:?usage: rerun.sh INDEX DATE}"
date="${2:?usage: rerun.sh INDEX DATE}"
group="${GROUP:-$date}"
template="$here/shard-index.yaml"
count=$(sed -n 's/.*"--shard", "[0-9]*\/\([0-9]*\)".*/\1/p' "$template")
[[ "$index" =~ ^[0-9]+$ ]] && [ "$index" -lt "$count" ] \
    || { echo "rerun.sh: INDEX must be 0 to $((count - 1)), not $index" >&2; exit 2; }
[[ "$date" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] \
    || { echo "rerun.sh: DATE must be YYYY-MM-DD, not $date" >&2; exit 2; }
[[ "$group" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]] \
    || { echo "rerun.sh: GROUP must be 1 to 64 letters, digits, '.', '_' or '-'" >&2; exit 2; }
# A Job name is a DNS label: lower case, at most 63 characters.
name=$(printf 'recon-rerun-%s-shard-%s' "$group" "$index" | tr 'A-Z._' 'a-z--' | cut -c1-63 | sed 's/-*$//')
sed -e "s/^  name: recon-rerun-.*/  name: $name/" \
    -e "s|\"--shard\", \"[0-9]*/$count\", \"--date\", \"[0-9-]*\", \"--group\", \"[^\"]*\"|\"--shard\", \"$index/$count\", \"--date\", \"$date\", \"--group\", \"$group\"|" \
    "$template"
