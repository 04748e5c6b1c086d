#!/usr/bin/env bash
# Checks what each published package ships, from its built dist/ (run `npm run build` first):
# publint (exports, files, types paths) and @arethetypeswrong/cli (the types resolve for ESM
# consumers under node16 and bundler resolution; the packages are ESM-only on purpose).
set -euo pipefail
cd "$(dirname "$0")/.."
failed=0
for dir in packages/*/; do
  name=$(node -p "require('./${dir}package.json').name")
  if [ ! -d "${dir}dist" ]; then echo "$name: no dist/ (run npm run build first)"; failed=1; continue; fi
  if ! out=$(npx --no-install publint "$dir" --strict 2>&1); then echo "$out"; failed=1; else echo "$name: publint ok"; fi
  if ! out=$(cd "$dir" && npx --no-install attw --pack . --profile esm-only --format ascii 2>&1); then echo "$out"; failed=1; else echo "$name: attw ok"; fi
  # Built-ins that exist only with the node: prefix (node:sqlite, node:test) must keep it in the build.
  if grep -nE "(from |import\()[\"'](sqlite|test|sea)[\"']" "${dir}"dist/*.js; then echo "$name: a node:-only built-in lost its prefix in dist/"; failed=1; fi
done
exit $failed
