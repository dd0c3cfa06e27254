#!/usr/bin/env python3
"""Writes, as RESP for `redis-cli --pipe`, what a fleet holding N locks leaves on one master:
N lock keys "<prefix>bench-<k>" whose values are fleet::LockValue(agent id, token)
("<16 hex>:<40 hex>", src/fleet/records.h) with a PX, spread over --agents agents, and those
agents' registry entries (AgentRecord, index member, HolderReport of their oldest 200 locks).
The same ids and tokens for a given --seed, so every master gets the same keys.

    python3 bench/fleet/fill_locks.py --locks 10000 | redis-cli -p PORT --pipe
"""
import argparse
import json
import random
import sys
import time


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--locks", type=int, required=True)
    p.add_argument("--agents", type=int, default=5)
    p.add_argument("--prefix", default="lock:")
    p.add_argument("--px", type=int, default=600000, help="ttl of every key, ms")
    p.add_argument("--seed", type=int, default=17)
    args = p.parse_args()
    rng = random.Random(args.seed)
    now_ms = int(time.time() * 1000)
    ids = ["%016x" % rng.getrandbits(64) for _ in range(args.agents)]
    out = sys.stdout.buffer
    held = {i: [] for i in ids}
    for k in range(args.locks):
        agent = ids[k % args.agents]
        value = "%s:%040x" % (agent, rng.getrandbits(160))
        resource = "bench-%d" % k
        out.write(resp("SET", args.prefix + resource, value, "PX", args.px))
        if len(held[agent]) < 200:
            held[agent].append(resource)
    for n, agent in enumerate(ids):
        record = {"id": agent, "name": "bench-%d" % n, "host": "bench-host-%d" % n,
                  "pid": 1000 + n, "version": "bench", "admin_url": "",
                  "started_unix_ms": now_ms, "heartbeat_unix_ms": now_ms,
                  "heartbeat_ttl_ms": args.px,
                  "settings": {"key_prefix": args.prefix, "max_ttl_ms": 60000,
                               "drift_factor": 0.01, "restart_quarantine": True,
                               "fence_prefix": "fence:", "fence_quorum": 4}}
        report = {"unix_ms": now_ms,
                  "locks_total": len(range(n, args.locks, args.agents)), "waiters_total": 0,
                  "locks": [{"resource": r, "pid": 20000 + i, "uid": 1000,
                             "cmdline": "/usr/bin/bench-worker --resource " + r,
                             "held_since_unix_ms": now_ms - 1000, "ttl_ms": args.px,
                             "renew": True, "fence": None, "waiters": 0}
                            for i, r in enumerate(held[agent])],
                  "waiters": []}
        out.write(resp("SET", "lockwarden:agent:" + agent,
                       json.dumps(record, separators=(",", ":")), "PX", args.px))
        out.write(resp("ZADD", "lockwarden:agents", now_ms + args.px, agent))
        out.write(resp("SET", "lockwarden:holders:" + agent,
                       json.dumps(report, separators=(",", ":")), "PX", args.px))


if __name__ == "__main__":
    main()
