#!/usr/bin/env bash
# The public API of the library crates against the committed list, .ci/public-api.txt: every
# item a user can name, hidden ones (#[doc(hidden)]) marked, so that a change to the API, and
# above all a hidden-but-public item, shows in review. Fails with the diff when they differ.
#
#   .ci/public-api.sh          check
#   .ci/public-api.sh --bless  rewrite .ci/public-api.txt (review the diff, then commit it)
#
# The list comes from rustdoc's JSON output (.ci/public-api.py reads it). That output is
# unstable: RUSTC_BOOTSTRAP=1 lets the pinned toolchain (rust-toolchain.toml) emit it, so the
# check needs no nightly, and the pin fixes its format. A new toolchain may change the list's
# wording: bless it with the toolchain change.
set -euo pipefail
cd "$(dirname "$0")/.."

crates=(oxicub oxicub-algorithms oxicub-kernels oxicub-params oxicub-env)
# Its own target directory: RUSTC_BOOTSTRAP must not touch the main build's.
out="${CARGO_TARGET_DIR:-target}/public-api"
jsons=()
for crate in "${crates[@]}"; do
    # The facade with its optional `candle` module: a feature's items are public API too.
    features=()
    [[ "$crate" == oxicub ]] && features=(--features candle)
    RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$out" cargo rustdoc --quiet --lib -p "$crate" "${features[@]}" -- \
        -Z unstable-options --output-format json --document-hidden-items
    jsons+=("$out/doc/${crate//-/_}.json")
done
python3 .ci/public-api.py "${jsons[@]}" >"$out/public-api.txt"

if [[ "${1:-}" == "--bless" ]]; then
    cp "$out/public-api.txt" .ci/public-api.txt
    echo "wrote .ci/public-api.txt ($(wc -l <.ci/public-api.txt) items): review and commit it"
    exit 0
fi
if ! diff -u .ci/public-api.txt "$out/public-api.txt"; then
    echo >&2
    echo "The public API differs from .ci/public-api.txt (diff above: - listed, + now)." >&2
    echo "If the change is intended, run .ci/public-api.sh --bless and commit the new list;" >&2
    echo "an item marked #[doc(hidden)] is public all the same: make it private or unsafe." >&2
    exit 1
fi
echo "public API unchanged ($(wc -l <.ci/public-api.txt) items)"
