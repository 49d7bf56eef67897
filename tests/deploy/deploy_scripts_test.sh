#!/usr/bin/env bash
# The secure defaults of deploy/slurm/ and deploy/systemd/, without a cluster: the sbatch scripts
# run under bash with `srun` a recorder on PATH (it writes its command line, then runs it: the
# worker script's node_worker really runs) and fake spheret programs that write theirs.
#   deploy_scripts_test.sh SOURCE_DIR SPHERET_COORDINATOR
# The coordinator job refuses to start without TLS unless SPHERET_INSECURE=1 is given, always
# requires tokens and keeps /metrics on 127.0.0.1; the worker's default work dir is a private
# per-user folder (a planted one is refused); the systemd unit requires tokens; every flag passed is
# one spheret-coordinator knows.
set -uo pipefail
source_dir=$1 coordinator=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

mkdir -p "$tmp/path" "$tmp/bin" "$tmp/shared" "$tmp/tls" "$tmp/tmp"
cat > "$tmp/path/srun" <<'EOF'
#!/usr/bin/env bash
echo "$*" > "$RECORD/srun"
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
exec "$@"
EOF
for program in spheret-coordinator spheret-worker spheret-lm; do
  # shellcheck disable=SC2016  # the fake program expands "$*" when it runs
  printf '#!/usr/bin/env bash\necho "$*" > "$RECORD/%s"\n' "$program" > "$tmp/bin/$program"
done
chmod +x "$tmp/path/srun" "$tmp/bin/"*

# Runs sbatch script $1 with the variables that follow; its stderr is in $tmp/record/stderr.
run() {
  local script=$1
  shift
  rm -rf "$tmp/record" && mkdir "$tmp/record"
  env -i PATH="$tmp/path:/usr/bin:/bin" HOME="$tmp" RECORD="$tmp/record" SLURM_JOB_ID=1 \
    SLURM_JOB_NODELIST=node1 SLURMD_NODENAME=node1 SPHERET_SHARED="$tmp/shared" \
    SPHERET_BIN="$tmp/bin" SPHERET_DB="$tmp/db/spheret.db" SPHERET_ADVERTISE=127.0.0.1 "$@" \
    bash "$source_dir/deploy/slurm/$script" > /dev/null 2> "$tmp/record/stderr"
}
recorded() { cat "$tmp/record/$1" 2> /dev/null; }
has_word() { [[ " $1 " == *" $2 "* ]]; }

# The coordinator job: no TLS and no SPHERET_INSECURE=1 is refused before anything starts.
run spheret-coordinator.sbatch
status=$?
[ "$status" = 2 ] || fail "coordinator without TLS: exit $status, expected 2"
grep -q "set SPHERET_TLS_DIR" "$tmp/record/stderr" || fail "no hint: $(recorded stderr)"
[ -z "$(recorded srun)" ] || fail "coordinator started without TLS: $(recorded srun)"

run spheret-coordinator.sbatch SPHERET_TLS_DIR="$tmp/tls" || fail "with TLS: $(recorded stderr)"
args=$(recorded spheret-coordinator)
for word in --require-tokens --tls-cert --tls-key 127.0.0.1:9464; do
  has_word "$args" "$word" || fail "coordinator with TLS: no $word in: $args"
done
has_word "$args" --insecure && fail "coordinator with TLS passes --insecure: $args"
help=$("$coordinator" --help)
for word in $args; do
  if [ "${word#--}" != "$word" ] && [[ "$help" != *"$word"* ]]; then
    fail "spheret-coordinator has no flag $word"
  fi
done

run spheret-coordinator.sbatch SPHERET_INSECURE=1 || fail "insecure: $(recorded stderr)"
args=$(recorded spheret-coordinator)
has_word "$args" --insecure || fail "SPHERET_INSECURE=1 without --insecure: $args"
has_word "$args" --require-tokens || fail "SPHERET_INSECURE=1 drops the tokens: $args"
run spheret-coordinator.sbatch SPHERET_INSECURE=1 SPHERET_METRICS_LISTEN=0.0.0.0:9999 ||
  fail "metrics listen: $(recorded stderr)"
has_word "$(recorded spheret-coordinator)" 0.0.0.0:9999 || fail "SPHERET_METRICS_LISTEN ignored"

# The worker job: its default work dir is a private folder of this user.
private="$tmp/tmp/spheret-$(id -u)"
run spheret-worker.sbatch SPHERET_COORDINATOR=127.0.0.1:7070 TMPDIR="$tmp/tmp" ||
  fail "worker: $(recorded stderr)"
args=$(recorded spheret-worker)
has_word "$args" "$private/spheret-worker-slurm-node1" || fail "worker work dir: $args"
[ "$(stat -c %a "$private" 2> /dev/null)" = 700 ] || fail "$private is not mode 0700"
# One made first by someone else (here: writable by all, or a link) is refused.
chmod 0777 "$private"
run spheret-worker.sbatch SPHERET_COORDINATOR=127.0.0.1:7070 TMPDIR="$tmp/tmp"
status=$?
[ "$status" = 2 ] || fail "worker in a world-writable work dir: exit $status, expected 2"
grep -q "$private (owner uid $(id -u), mode 777) is not private" "$tmp/record/stderr" ||
  fail "no reason given: $(recorded stderr)"
[ -z "$(recorded spheret-worker)" ] || fail "the worker started in $private"
rm -rf "$private" && mkdir -p "$tmp/elsewhere" && ln -s "$tmp/elsewhere" "$private"
run spheret-worker.sbatch SPHERET_COORDINATOR=127.0.0.1:7070 TMPDIR="$tmp/tmp"
[ -z "$(recorded spheret-worker)" ] || fail "the worker started in a linked $private"

# The systemd unit requires tokens even on loopback, and passes only flags the coordinator knows.
exec_start=$(sed -n 's/^ExecStart=//p' "$source_dir/deploy/systemd/spheret-coordinator.service")
has_word "$exec_start" --require-tokens || fail "the systemd unit lacks --require-tokens"
for word in $exec_start; do
  if [ "${word#--}" != "$word" ] && [[ "$help" != *"$word"* ]]; then
    fail "spheret-coordinator has no flag $word (systemd unit)"
  fi
done

echo "deploy scripts: $failures problem(s)"
[ "$failures" = 0 ]
