# Shared by the set-up scripts: `step` runs one long step with progress on stderr.
#   step "what it does" command args...
# prints "<prefix>: what it does ...", then every 30 s "<prefix>:   ... still running (1 min 30 s)" with
# the last line the command logged (with pip -v, e.g. cmake's "[ 45%] Building C object ..."),
# then "<prefix>: what it does: done in 2 min 5 s". The command's own output goes to a log file under
# ${TMPDIR:-/tmp}; on failure its last 40 lines are printed and the step's exit status is returned.
STEP_PREFIX=${STEP_PREFIX:-setup}
STEP_HEARTBEAT_S=${STEP_HEARTBEAT_S:-30}

human_time() {
  local s=$1
  if [ "$s" -ge 60 ]; then echo "$((s / 60)) min $((s % 60)) s"; else echo "$s s"; fi
}

step() {
  local what=$1; shift
  local log start pid rc=0 next last
  log=$(mktemp "${TMPDIR:-/tmp}/evoharness-setup.XXXXXX.log")
  start=$SECONDS
  echo "$STEP_PREFIX: $what ..." >&2
  "$@" >"$log" 2>&1 &
  pid=$!
  next=$((start + STEP_HEARTBEAT_S))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      last=$(grep -a '[^[:space:]]' "$log" | tail -1 | tr -s '[:space:]' ' ' | cut -c1-100)
      echo "$STEP_PREFIX:   ... still running ($(human_time $((SECONDS - start))))${last:+: $last}" >&2
      next=$((next + STEP_HEARTBEAT_S))
    fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "$STEP_PREFIX: $what: FAILED (exit $rc) after $(human_time $((SECONDS - start))); last lines of $log:" >&2
    tail -40 "$log" >&2
    return "$rc"
  fi
  echo "$STEP_PREFIX: $what: done in $(human_time $((SECONDS - start)))" >&2
  rm -f "$log"
}
