#!/usr/bin/env bash
# Tests of `lockwarden lock` and lockwarden.sh against a live agent at $LOCKWARDEN_SOCKET with
# real masters; `lockwarden` must be in PATH.
#
# Run by tests/integration/clients_test.cc, which starts 5 redis-server masters and the agent and
# sets LWTEST_CONTROL=stdio: a test that needs the masters changed prints `@@lw <action>` on
# stdout and reads the harness's answer from stdin (clients/README.md#tests). Without
# LWTEST_CONTROL, those tests are skipped. Each test runs in its own subshell with set -e, so
# its session is its own and the first failing command fails it.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lockwarden.sh
. "$here/lockwarden.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

controlled() { [[ ${LWTEST_CONTROL:-} == stdio ]]; }
# These tests must pass the same way on a loaded machine (and against an ASan-built agent), so
# nothing here depends on how fast anything is: an acquire that must succeed waits (a free lock is
# granted at once; the wait only lets the agent retry when a master answered too slowly;
# `lockwarden lock` waits 30 s by default), and an event is awaited with a generous deadline
# (only a failing test waits it out).
WAIT_MS=10000
EVENT_S=15
exec {harness}>&1  # the harness's pipe, also from inside $(...)

# control ACTION: asks the harness to act on the masters; prints its answer after "ok ".
control() {
  local answer
  echo "@@lw $1" >&"$harness"
  IFS= read -r answer
  [[ $answer == ok* ]] || { echo "harness could not $1: $answer" >&2; return 1; }
  echo "${answer:3}"
}

expect() {  # expect WHAT ACTUAL EXPECTED
  [[ $2 == "$3" ]] || { echo "  $1: got '$2', want '$3'" >&2; return 1; }
}

# lock ARGS...: `lockwarden lock ARGS` with its exit code in $rc (stdin kept from the harness).
lock() {
  rc=0
  lockwarden lock "$@" 2>>"$tmp/lock.err" || rc=$?
}

test_cli_runs_the_command_under_the_lock() {
  lock --ttl 10s sh:cli -- bash -c '
    [[ $LOCKWARDEN_TOKEN =~ ^[0-9a-f]{40}$ ]] || exit 1
    if [[ ${LWTEST_CONTROL:-} == stdio ]]; then
      echo "@@lw count $LOCKWARDEN_RESOURCE"; read -r answer; [[ $answer == "ok 5" ]] || exit 2
    fi
    exit 7'
  expect "exit code" "$rc" 7
  if controlled; then expect "masters holding it after" "$(control "count sh:cli")" 0; fi
}

test_cli_timeout_when_another_session_holds_it() {
  lw_open
  lw_acquire sh:busy 10000 "$WAIT_MS"
  lock --wait 100ms sh:busy -- true
  expect "exit code" "$rc" 75
  grep -q timeout "$tmp/lock.err"
}

test_cli_waiter_gets_the_lock_when_the_holder_releases() {
  lw_open
  lw_acquire sh:queue 10000 "$WAIT_MS"
  lockwarden lock --wait 30s sh:queue -- true </dev/null &
  local waiter=$!
  # The agent lists queued requests (of every lock): release only once the waiter is really
  # waiting for ours.
  local deadline=$((SECONDS + EVENT_S)) queued='"resource":"sh:queue"[^}]*"waiters":1[,}]'
  until lw_call '"op":"locks"' && [[ $LW_REPLY =~ $queued ]]; do
    ((SECONDS < deadline)) || { echo "  the waiter never queued" >&2; return 1; }
    sleep 0.01
  done
  lw_release sh:queue "$LW_TOKEN"
  wait "$waiter" && rc=0 || rc=$?
  expect "waiter exit code" "$rc" 0
}

test_permits_let_k_hold_at_once() {
  lw_open
  lw_acquire sh:pool 10000 "$WAIT_MS" permits=2
  expect "mode" "$LW_MODE" permit
  # The command holds the other permit; a third holder finds none free.
  lock --permits 2 sh:pool -- bash -c 'echo "$LOCKWARDEN_PERMIT" > '"$tmp/permit"'
    lockwarden lock --wait 0s --permits 2 sh:pool -- true; echo $? > '"$tmp/third"
  expect "exit code" "$rc" 0
  expect "permits held" "$(($(cat "$tmp/permit") + LW_PERMIT))" 1
  expect "third holder's exit code" "$(cat "$tmp/third")" 75
  if lw_acquire sh:pool 10000 0 permits=3; then return 1; fi
  expect "another size" "$LW_ERROR" kind_mismatch
}

test_shared_holds_at_once() {
  lw_open
  lw_acquire sh:cfg 10000 "$WAIT_MS" shared
  expect "mode" "$LW_MODE" shared
  lock --shared sh:cfg -- bash -c \
    'lockwarden lock --wait 0s sh:cfg -- true; echo $? > '"$tmp/writer"
  expect "exit code" "$rc" 0
  expect "writer's exit code" "$(cat "$tmp/writer")" 75
  lock --permits 2 --shared sh:cfg -- true
  expect "--permits with --shared" "$rc" 64
}

test_cli_several_resources_all_or_none() {
  # Named in any order, taken in one order, listed one per line; each held against others.
  lock sh:set:b sh:set:a -- bash -c '
    [[ $LOCKWARDEN_RESOURCES == $'"'"'sh:set:a\nsh:set:b'"'"' ]] || exit 1
    [[ -z ${LOCKWARDEN_RESOURCE+set} ]] || exit 2
    lockwarden lock --wait 0s sh:set:b -- true; echo $? > '"$tmp/b"
  expect "exit code" "$rc" 0
  expect "another holder's exit code" "$(cat "$tmp/b")" 75
  # One of them held elsewhere: neither is taken, and the command does not run.
  lw_open
  lw_acquire sh:set:b 10000 "$WAIT_MS"
  lock --wait 100ms sh:set:a sh:set:b -- touch "$tmp/ran"
  expect "exit code" "$rc" 75
  [[ ! -e $tmp/ran ]]
  lw_acquire sh:set:a 10000 0  # free: the all-or-none acquire let go of it
}

test_session_timeout_error() {
  lw_open
  lw_acquire sh:busy2 10000 "$WAIT_MS"
  (
    trap lw_close EXIT
    lw_open
    if lw_acquire sh:busy2 1000 200; then exit 1; fi
    expect "error" "$LW_ERROR" timeout
    [[ -n $LW_MESSAGE ]]
  )
}

test_renew_keeps_the_lock_past_its_ttl() {
  # A ttl long enough that a renewal every ttl/3 on a loaded machine is never late; the sleeps
  # are the point of the test: 3 ttls pass, and only renewals keep the locks. Both at once.
  lockwarden lock --ttl 2s sh:renew1 -- sleep 6 </dev/null 2>>"$tmp/lock.err" &
  local cli=$!
  lw_open
  lw_acquire sh:renew2 2000 "$WAIT_MS" renew
  sleep 6
  if lw_check_lost; then echo "  lost: $LW_EVENT" >&2; return 1; fi
  lw_call '"op":"held"'
  [[ $LW_REPLY == *'"resource":"sh:renew2"'*'"renew":true'* ]]
  lock --wait 200ms sh:renew2 -- true
  expect "another holder's exit code" "$rc" 75
  wait "$cli" && rc=0 || rc=$?
  expect "lockwarden lock exit code" "$rc" 0  # lost (72) unless the agent renews it
}

test_explicit_extend() {
  lw_open
  # 5 s: enough to still hold it when the extend arrives; 20 s after: over 10 s is the new ttl.
  lw_acquire sh:extend 5000 "$WAIT_MS"
  lw_extend sh:extend "$LW_TOKEN" 20000
  ((LW_VALIDITY_MS > 10000))
  if controlled; then (($(control "pttl sh:extend") > 10000)); fi
  lw_release sh:extend "$LW_TOKEN"
}

test_lock_without_renew_expires_and_is_reported_lost() {
  lw_open
  lw_acquire sh:expire 1000 "$WAIT_MS"
  lw_wait_event "$EVENT_S"
  expect "event" "$(lw_field event "$LW_EVENT")" lost
  expect "reason" "$(lw_field reason "$LW_EVENT")" expired
  expect "token" "$(lw_field token "$LW_EVENT")" "$LW_TOKEN"
}

test_lost_when_renewal_fails() {
  controlled || return 77
  # A session's lock: the agent pushes `lost`.
  lw_open
  lw_acquire sh:lost1 2000 "$WAIT_MS" renew
  # lockwarden lock: it terminates the command and exits 72.
  mkfifo "$tmp/started"
  lockwarden lock --ttl 2s sh:lost2 -- \
    sh -c "echo started > $tmp/started; exec sleep 30" </dev/null 2>>"$tmp/lock.err" &
  local cli=$!
  # Opened read-write: the read times out (rather than blocking in open) if it never starts.
  local started
  exec {started}<>"$tmp/started"
  read -r -t "$EVENT_S" _ <&"$started" || { echo "  lockwarden lock never started" >&2; return 1; }
  control flush >/dev/null  # the keys vanish: the next renewals find the locks gone
  lw_wait_event "$EVENT_S"
  expect "event" "$(lw_field event "$LW_EVENT")" lost
  expect "reason" "$(lw_field reason "$LW_EVENT")" renew_failed
  wait "$cli" && rc=0 || rc=$?
  expect "lockwarden lock exit code" "$rc" 72
}

test_cli_lock_resumes_across_an_agent_restart() {
  controlled || return 77
  mkfifo "$tmp/resume-started"
  lockwarden lock --ttl 2s sh:resume -- \
    sh -c "echo started > $tmp/resume-started; while [ ! -e $tmp/resume-go ]; do sleep 0.02; done; exit 7" \
    </dev/null 2>>"$tmp/lock.err" &
  local cli=$!
  local started
  exec {started}<>"$tmp/resume-started"
  read -r -t "$EVENT_S" _ <&"$started" || { echo "  lockwarden lock never started" >&2; return 1; }
  control restart-agent >/dev/null  # kill -9, then a new run on the same socket
  local waited=0
  until grep -q 'resumed lock "sh:resume"' "$tmp/lock.err"; do
    ((waited++ < EVENT_S * 50)) || { echo "  never resumed" >&2; return 1; }
    sleep 0.02
  done
  sleep 2.5  # past the 2 s ttl: only the new run's renewals keep the keys
  expect "masters holding it" "$(control "count sh:resume")" 5
  touch "$tmp/resume-go"
  wait "$cli" && rc=0 || rc=$?
  expect "lockwarden lock exit code" "$rc" 7
  expect "masters holding it after" "$(control "count sh:resume")" 0
}

test_unreachable_agent_error_names_the_socket() {
  LW_SOCKET=$tmp/no-agent.sock
  if lw_open; then return 1; fi
  expect "error" "$LW_ERROR" unreachable
  [[ $LW_MESSAGE == *"at $tmp/no-agent.sock:"* ]] || { echo "  message: $LW_MESSAGE" >&2; return 1; }
}

test_no_quorum_when_a_majority_of_masters_is_down() {
  controlled || return 77
  lw_open
  control kill-majority >/dev/null
  lock --wait 0s sh:quorum -- true
  local cli_rc=$rc session_error=
  lw_acquire sh:quorum 1000 100 || session_error=$LW_ERROR
  control restore >/dev/null
  expect "lockwarden lock exit code" "$cli_rc" 69
  expect "session error" "$session_error" no_quorum
  lw_acquire sh:quorum 1000 "$WAIT_MS"
}

failed=0
for t in $(compgen -A function test_); do
  (set -e; trap 'lw_close; kill $(jobs -p) 2>/dev/null || true' EXIT; "$t")
  case $? in
    0) echo "ok   $t" >&2 ;;
    77) echo "skip $t (needs the harness: LWTEST_CONTROL=stdio)" >&2 ;;
    *) echo "FAIL $t" >&2; failed=$((failed + 1)); cat "$tmp/lock.err" >&2 2>/dev/null ;;
  esac
  rm -f "$tmp/lock.err"
done
echo "$failed test(s) failed" >&2
((failed == 0))
