#!/usr/bin/env bash
# lockwarden from the shell, against the agent at $LOCKWARDEN_SOCKET:  bash example.sh [resource]
#   1. `lockwarden lock`: run one command under a lock (renewed by the agent, released at exit).
#   2. socat one-liners: a request or two, on a connection that closes right after.
#   3. lockwarden.sh: a session kept open across requests (explicit extend, the `lost` event).
set -u
resource=${1:-example:shell}
export LOCKWARDEN_SOCKET=${LOCKWARDEN_SOCKET:-/run/lockwarden/lockwarden.sock}

# 1. Wait up to 5 s for another holder; the lock is taken with renew:true, so a 3 s ttl is fine
#    for a longer command. The exit code says what happened.
lockwarden lock -v --ttl 3s --wait 5s "$resource" -- \
  sh -c 'echo "working under $LOCKWARDEN_RESOURCE (token $LOCKWARDEN_TOKEN)"; sleep 2'
case $? in
  0) echo "the command ran under the lock and succeeded" ;;
  75) echo "busy: someone else held $resource for all 5 s (timeout)" ;;
  69) echo "lock service unavailable: agent down or no quorum of masters (no_quorum)" >&2 ;;
  72) echo "the lock was lost while the command ran; it was terminated (lost)" >&2 ;;
  *) echo "the command failed, or a usage error (64)" >&2 ;;
esac

# 2. One-liners. socat half-closes the connection when its input ends: the agent answers every
#    request it was sent (an acquire waits up to its wait_ms: give socat a -t longer than that,
#    it reads only 0.5 s by default), then ends the session and releases its locks. Hold locks
#    with 1 or 3.
echo '{"id":1,"op":"health"}' | socat - "UNIX-CONNECT:$LOCKWARDEN_SOCKET"
printf '%s\n' '{"id":"who","op":"locks"}' '{"id":"up","op":"ping"}' |
  socat - "UNIX-CONNECT:$LOCKWARDEN_SOCKET"  # one reply per line, matched by id

# 3. A session: acquire with wait, extend, watch for `lost`, release.
# shellcheck source=lockwarden.sh
. "$(dirname "${BASH_SOURCE[0]}")/lockwarden.sh"
lw_open || { echo "$LW_MESSAGE" >&2; exit 69; }
if ! lw_acquire "$resource" 3000 5000; then  # ttl 3 s, wait 5 s, no renew: we extend ourselves
  case $LW_ERROR in
    timeout) echo "busy: $LW_MESSAGE"; exit 75 ;;
    no_quorum) echo "lock service unavailable: $LW_MESSAGE" >&2; exit 69 ;;
    *) echo "$LW_ERROR: $LW_MESSAGE" >&2; exit 1 ;;
  esac
fi
token=$LW_TOKEN
echo "acquired $resource: $LW_REPLY"
for step in 1 2 3; do
  if lw_check_lost; then
    echo "lost ($(lw_field reason "$LW_EVENT")): stopping the work" >&2
    exit 72
  fi
  sleep 0.5  # one step of real work
  lw_extend "$resource" "$token" 3000 || { echo "extend: $LW_ERROR: $LW_MESSAGE" >&2; exit 72; }
  echo "step $step done, extended: valid $LW_VALIDITY_MS ms"
done
lw_release "$resource" "$token" && echo "released $resource"
lw_close
