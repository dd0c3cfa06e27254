#!/usr/bin/env bash
export LOCKWARDEN_SOCKET=/tmp/lw-live/lw.sock
end=$((SECONDS + ${1:-240}))
worker() { while ((SECONDS < end)); do /tmp/lw-build/lockwarden lock --ttl 5s --wait 300ms hot:res -- sleep 0.2 >/dev/null 2>&1; /tmp/lw-build/lockwarden lock --ttl 5s --wait 1s "cold:$RANDOM" -- true >/dev/null 2>&1; done; }
for i in 1 2 3 4; do worker & done
wait
