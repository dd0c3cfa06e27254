# shellcheck shell=bash disable=SC2034  # LW_* variables are set for the caller
# Bash functions that hold a session with the lockwarden agent through socat, for scripts that
# need more than `lockwarden lock` (several locks, explicit extend). Source it:
#
#   . clients/shell/lockwarden.sh
#   lw_open || exit 69
#   if lw_acquire db/migrations 30000 5000 renew; then  # ttl_ms wait_ms [renew shared permits=K]
#     ...work; lw_check_lost && echo "lost: $LW_EVENT"...
#     lw_release db/migrations "$LW_TOKEN"
#   else
#     case $LW_ERROR in timeout) ...busy... ;; no_quorum) ...outage... ;; esac
#   fi
#   lw_close
#
# One session per shell (a bash coprocess); a subshell can open its own. Closing it, or the
# script exiting, makes the agent release its locks. After each call: LW_REPLY is the reply
# line; on failure LW_ERROR is the error code and LW_MESSAGE the message (LW_ERROR=disconnected
# when the connection ended, unreachable when lw_open could not connect). Lines pushed by the agent (the `lost` event) are queued in
# LW_EVENTS while waiting for a reply; lw_wait_event and lw_check_lost take them from there.
# Needs bash 4+ and socat. Field extraction is a regex on flat top-level fields, not a JSON
# parser: use jq on LW_REPLY for anything nested.

LW_SOCKET=${LOCKWARDEN_SOCKET:-/run/lockwarden/lockwarden.sock}
LW_ID=0
LW_EVENTS=()

# lw_open: connects (a socat coprocess) and pings the agent; returns 1 if unreachable, with
# LW_ERROR=unreachable and LW_MESSAGE naming the socket tried.
lw_open() {
  coproc LW_CONN { exec socat - "UNIX-CONNECT:$LW_SOCKET" 2>/dev/null; }
  lw_call '"op":"ping"' && return 0
  if [[ $LW_ERROR == disconnected ]]; then
    LW_ERROR=unreachable
    if [[ -S $LW_SOCKET ]]; then
      LW_MESSAGE="cannot connect to the lockwarden agent at $LW_SOCKET: nothing answers there (agent stopped, or no permission)"
    else
      LW_MESSAGE="cannot connect to the lockwarden agent at $LW_SOCKET: no socket there (is the agent running? LOCKWARDEN_SOCKET names the socket)"
    fi
  fi
  return 1
}

# lw_close: ends the session; the agent releases every lock it still holds.
lw_close() {
  [[ -n ${LW_CONN_PID:-} ]] || return 0
  local pid=$LW_CONN_PID in=${LW_CONN[0]:-} out=${LW_CONN[1]:-}
  # socat sees EOF and exits; the agent releases the session's locks. (No descriptors left:
  # socat has exited already, e.g. it could not connect.)
  [[ -n $out ]] && exec {out}>&-
  [[ -n $in ]] && exec {in}<&-
  wait "$pid" 2>/dev/null || true  # socat's status (1 when it could not connect)
  return 0
}

# lw_field NAME LINE: prints the value of the top-level field NAME of LINE (strings unquoted).
lw_field() {
  local re="\"$1\":(\"(([^\"\\\\]|\\\\.)*)\"|[^,}]*)"
  [[ $2 =~ $re ]] || return 1
  if [[ ${BASH_REMATCH[1]} == \"* ]]; then
    local v=${BASH_REMATCH[2]//\\\"/\"}  # unescapes \" (other escapes are left as sent)
    printf '%s\n' "$v"
  else
    printf '%s\n' "${BASH_REMATCH[1]}"
  fi
}

# lw_string TEXT: TEXT as a JSON string (quotes, backslashes and tabs escaped).
lw_string() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "${s//$'\t'/\\t}"
}

# lw_call 'FIELDS': sends {"id":N,FIELDS} and waits for the reply with that id. Returns 0 if
# it says ok:true, else 1 with LW_ERROR and LW_MESSAGE set.
lw_call() {
  local id=$((++LW_ID)) line
  LW_REPLY='' LW_ERROR='' LW_MESSAGE=''
  # Written with SIGPIPE ignored: to a connection whose socat has exited (not yet reaped) the
  # write fails with EPIPE and reads as disconnected, instead of the signal killing the caller.
  # (Coproc descriptors are not there in a subshell; a PIPE trap of the caller's is reset.)
  local sent=0
  trap '' PIPE
  if [[ -n ${LW_CONN[1]:-} ]] && printf '{"id":%d,%s}\n' "$id" "$1" >&"${LW_CONN[1]}" 2>/dev/null; then
    sent=1
  fi
  trap - PIPE
  if ((!sent)); then
    LW_ERROR=disconnected LW_MESSAGE="no session (lw_open) or it was closed"
    return 1
  fi
  while IFS= read -r line <&"${LW_CONN[0]}"; do
    if [[ $line == *'"event":'* ]]; then
      LW_EVENTS+=("$line")
    elif [[ $(lw_field id "$line") == "$id" ]]; then
      LW_REPLY=$line
      [[ $(lw_field ok "$line") == true ]] && return 0
      LW_ERROR=$(lw_field error "$line") LW_MESSAGE=$(lw_field message "$line")
      return 1
    fi
  done
  LW_ERROR=disconnected LW_MESSAGE="the agent closed the connection"
  return 1
}

# lw_acquire RESOURCE [TTL_MS] [WAIT_MS] [OPTION...]: takes the lock; sets LW_TOKEN, LW_MODE
# (exclusive, shared or permit) and LW_PERMIT (which permit of a semaphore, else empty).
# OPTIONs: renew (the agent extends it while the session lasts), shared (a read hold: readers
# share, an exclusive hold excludes them), permits=K (one permit of a semaphore of K), fence.
lw_acquire() {
  local fields opt
  fields="\"op\":\"acquire\",\"resource\":$(lw_string "$1"),\"wait_ms\":${3:-0}"
  [[ -n ${2:-} ]] && fields+=",\"ttl_ms\":$2"
  for opt in "${@:4}"; do
    case $opt in
      renew | shared | fence) fields+=",\"$opt\":true" ;;
      permits=*) fields+=",\"permits\":${opt#permits=}" ;;
      *)
        LW_ERROR=bad_request LW_MESSAGE="lw_acquire: unknown option $opt (renew, shared, permits=K, fence)"
        return 1
        ;;
    esac
  done
  LW_TOKEN='' LW_MODE='' LW_PERMIT=''
  lw_call "$fields" || return 1
  LW_TOKEN=$(lw_field token "$LW_REPLY")
  LW_MODE=$(lw_field mode "$LW_REPLY") || LW_MODE=exclusive
  LW_PERMIT=$(lw_field permit "$LW_REPLY") || LW_PERMIT=''
}

# lw_extend RESOURCE TOKEN TTL_MS: resets the lock's ttl; sets LW_VALIDITY_MS.
lw_extend() {
  lw_call "\"op\":\"extend\",\"resource\":$(lw_string "$1"),\"token\":\"$2\",\"ttl_ms\":$3" \
    || return 1
  LW_VALIDITY_MS=$(lw_field validity_ms "$LW_REPLY")
}

# lw_release RESOURCE TOKEN: gives the lock back.
lw_release() {
  lw_call "\"op\":\"release\",\"resource\":$(lw_string "$1"),\"token\":\"$2\""
}

# lw_wait_event [SECONDS]: the next pushed event into LW_EVENT, waiting up to SECONDS (default:
# forever); returns 1 on timeout or when the connection ends.
lw_wait_event() {
  local line
  while ((${#LW_EVENTS[@]} == 0)); do
    IFS= read -r ${1:+-t "$1"} line <&"${LW_CONN[0]}" || return 1
    [[ $line == *'"event":'* ]] && LW_EVENTS+=("$line")  # a late reply nobody waits for: drop
  done
  LW_EVENT=${LW_EVENTS[0]}
  LW_EVENTS=("${LW_EVENTS[@]:1}")
}

# lw_check_lost: returns 0 (and sets LW_EVENT) if a `lost` event has arrived, without waiting.
lw_check_lost() {
  lw_wait_event 0.001 && [[ $(lw_field event "$LW_EVENT") == lost ]]
}
