#!/usr/bin/env bash
# Validates every Kubernetes manifest under packaging/kubernetes/ (*.yaml, *.yml, *.json, each
# document of each file) against the Kubernetes JSON schemas of each version in `versions`,
# offline: kubernetes-validate (PyPI, installed by scripts/install-deps.sh) ships the schemas.
# --strict: an unknown field (a typo) fails like a wrong type. A failure prints the file, the
# resource, the Kubernetes version and the field's path; a document of a kind the schemas do not
# know fails too (kubernetes-validate only warns). The cross-references between the manifests
# (names, handlers, mounts) are tests/k8s_manifests.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
versions=(1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37)

if ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
  echo "validate-k8s.sh: python3 has no kubernetes_validate: run scripts/install-deps.sh" >&2
  exit 1
fi
mapfile -t files < <(find packaging/kubernetes -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) | sort)
if [ ${#files[@]} -eq 0 ]; then
  echo "validate-k8s.sh: no manifests under packaging/kubernetes/" >&2
  exit 1
fi
failed=0
for v in "${versions[@]}"; do
  # Every line of a pass starts with INFO and names its file; anything else (ERROR, WARN, a YAML
  # error) fails.
  if ! out=$(python3 -m kubernetes_validate --strict -k "$v" "${files[@]}" 2>&1) || grep -qv '^INFO ' <<<"$out"; then
    grep -v '^INFO ' <<<"$out" >&2 || true
    echo "validate-k8s.sh: the manifests above are not valid for Kubernetes $v" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "validate-k8s.sh: ${#files[@]} manifest files valid for Kubernetes ${versions[0]} to ${versions[-1]}"
