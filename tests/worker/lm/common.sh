# Shared by the spheret-lm end-to-end tests: sourced after `lm` is set. Makes a scratch folder
# ($dir, removed on exit), `fail`, and a small text corpus in $dir/text.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$dir/text"
for i in $(seq 1 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done > "$dir/text/a.txt"
