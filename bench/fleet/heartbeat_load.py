#!/usr/bin/env python3
"""The fleet heartbeat's cost on one master, for N simulated agents (docs/fleet.md, "Costs").

Each simulated agent is one TCP connection to the master. Every period (heartbeat_ttl / 3) it
sends the pipeline a FleetPresence heartbeat sends (src/fleet/presence.h):

    SET lockwarden:agent:<id> <AgentRecord JSON> PX <ttl>
    ZADD lockwarden:agents <expiry unix ms> <id>
    ZREMRANGEBYSCORE lockwarden:agents -inf <now - ttl>
    PEXPIRE lockwarden:holders:<id> <ttl>

and, on its first heartbeat only, its HolderReport (SET lockwarden:holders:<id> ... PX <ttl>:
a report is rewritten only when it changed). The agents' phases are spread evenly over the
period, as independent agents' are. It measures the master with INFO: CPU (used_cpu_sys +
used_cpu_user) per second of wall time, commands per second, and used_memory per agent (the
connection, then the registry entry and the report).

Standard library only (RESP over plain sockets); it needs no lockwarden code.

    python3 bench/fleet/heartbeat_load.py --port 6379 --agents 1000 --seconds 60
"""
import argparse
import json
import os
import selectors
import socket
import sys
import time


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def info(sock_file, sock, section):
    sock.sendall(resp("INFO", section))
    header = sock_file.readline()
    assert header.startswith(b"$"), header
    body = sock_file.read(int(header[1:]) + 2).decode()
    fields = {}
    for line in body.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k] = v
    return fields


def agent_record(i, agent_id, ttl_ms, now_ms):
    return json.dumps({
        "id": agent_id, "name": "host-%04d" % i, "host": "host-%04d.example.internal" % i,
        "pid": 4000 + i, "version": "0.17.0 (abcdef012345)",
        "admin_url": "http://10.0.%d.%d:9477/" % (i // 250, i % 250),
        "started_unix_ms": now_ms, "heartbeat_unix_ms": now_ms, "heartbeat_ttl_ms": ttl_ms,
        "settings": {"key_prefix": "lock:", "max_ttl_ms": 60000, "drift_factor": 0.01,
                     "restart_quarantine": True, "fence_prefix": "fence:", "fence_quorum": 4}},
        separators=(",", ":"))


def holder_report(i, locks, now_ms):
    held = [{"resource": "jobs:host-%04d:%d" % (i, k), "pid": 10000 + k, "uid": 1000,
             "cmdline": "/usr/bin/python3 /srv/app/worker.py --queue jobs --shard %d" % k,
             "held_since_unix_ms": now_ms - 1000 * k, "ttl_ms": 30000, "renew": True,
             "waiters": 0, "fence": None} for k in range(locks)]
    return json.dumps({"unix_ms": now_ms, "locks_total": locks, "waiters_total": 0,
                       "locks": held, "waiters": []}, separators=(",", ":"))


class Agent:
    def __init__(self, i, args):
        self.i = i
        self.id = os.urandom(8).hex()
        self.sock = socket.create_connection((args.host, args.port))
        self.sock.setblocking(False)
        self.pending = 0  # replies still to read
        self.buf = b""
        self.reported = False

    def pipeline(self, args, now_ms):
        ttl = args.ttl_ms
        cmds = [
            resp("SET", "lockwarden:agent:" + self.id, agent_record(self.i, self.id, ttl, now_ms),
                 "PX", ttl),
            resp("ZADD", "lockwarden:agents", now_ms + ttl, self.id),
            resp("ZREMRANGEBYSCORE", "lockwarden:agents", "-inf", now_ms - ttl),
        ]
        if not self.reported:
            cmds.append(resp("SET", "lockwarden:holders:" + self.id,
                             holder_report(self.i, args.locks_per_agent, now_ms), "PX", ttl))
            self.reported = True
        else:
            cmds.append(resp("PEXPIRE", "lockwarden:holders:" + self.id, ttl))
        self.sock.sendall(b"".join(cmds))  # small: fits the socket buffer
        self.pending += len(cmds)

    def drain(self):
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return
        self.buf += data
        # Every reply of this pipeline is a one-line reply (+OK, :n).
        while self.pending and b"\r\n" in self.buf:
            line, self.buf = self.buf.split(b"\r\n", 1)
            if line.startswith(b"-"):
                sys.exit("master error: " + line.decode())
            self.pending -= 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--ttl-ms", type=int, default=10000, help="heartbeat_ttl_ms; period = ttl/3")
    p.add_argument("--locks-per-agent", type=int, default=5, help="locks in each holder report")
    p.add_argument("--seconds", type=float, default=60, help="measured window")
    p.add_argument("--idle-seconds", type=float, default=10, help="idle baseline window")
    p.add_argument("--warmup", type=float, default=None, help="default: two periods")
    args = p.parse_args()
    period = args.ttl_ms / 3000.0
    warmup = args.warmup if args.warmup is not None else 2 * period

    probe = socket.create_connection((args.host, args.port))
    probe_file = probe.makefile("rb")
    mem_base = int(info(probe_file, probe, "memory")["used_memory"])
    agents = [Agent(i, args) for i in range(args.agents)]
    time.sleep(0.5)
    mem_conn = int(info(probe_file, probe, "memory")["used_memory"])
    # The master's own cost with the connections open and idle (serverCron, clientsCron): the
    # baseline the heartbeat's cost is measured above.
    s = info(probe_file, probe, "cpu")
    idle_cpu0, idle_t0 = float(s["used_cpu_sys"]) + float(s["used_cpu_user"]), time.monotonic()
    time.sleep(args.idle_seconds)
    s = info(probe_file, probe, "cpu")
    idle_cpu = (float(s["used_cpu_sys"]) + float(s["used_cpu_user"]) - idle_cpu0) / (
        time.monotonic() - idle_t0)

    sel = selectors.DefaultSelector()
    for a in agents:
        sel.register(a.sock, selectors.EVENT_READ, a)
    start = time.monotonic()
    next_due = [start + period * i / args.agents for i in range(args.agents)]
    measuring = False
    cpu0 = cmds0 = t0 = None
    heartbeats = 0
    end = start + warmup + args.seconds
    while True:
        now = time.monotonic()
        if not measuring and now >= start + warmup:
            s = info(probe_file, probe, "everything")
            cpu0 = float(s["used_cpu_sys"]) + float(s["used_cpu_user"])
            cmds0 = int(s["total_commands_processed"])
            mem_entries = int(s["used_memory"])
            t0, heartbeats, measuring = now, 0, True
        if now >= end:
            break
        now_ms = int(time.time() * 1000)
        for i, a in enumerate(agents):
            if next_due[i] <= now:
                a.pipeline(args, now_ms)
                next_due[i] += period
                heartbeats += 1
        wait = max(0.0, min(min(next_due), end) - time.monotonic())
        for key, _ in sel.select(timeout=min(wait, 0.05)):
            key.data.drain()
    s = info(probe_file, probe, "everything")
    wall = time.monotonic() - t0
    cpu = float(s["used_cpu_sys"]) + float(s["used_cpu_user"]) - cpu0
    cmds = int(s["total_commands_processed"]) - cmds0 - 1  # minus the INFO itself
    probe.sendall(resp("ZCARD", "lockwarden:agents"))
    index = int(probe_file.readline()[1:])
    n = args.agents
    print(json.dumps({
        "agents": n, "heartbeat_ttl_ms": args.ttl_ms, "period_s": round(period, 3),
        "locks_per_report": args.locks_per_agent, "window_s": round(wall, 1),
        "heartbeats_per_s": round(heartbeats / wall, 1),
        "master_commands_per_s": round(cmds / wall, 1),
        "master_cpu_percent_of_one_core": round(100 * cpu / wall, 2),
        "master_cpu_percent_idle_baseline": round(100 * idle_cpu, 2),
        "master_cpu_us_per_heartbeat_above_idle":
            round(1e6 * (cpu - idle_cpu * wall) / heartbeats, 1) if heartbeats else None,
        "used_memory_per_connection_bytes": round((mem_conn - mem_base) / n),
        "used_memory_per_agent_entry_bytes": round((mem_entries - mem_conn) / n),
        "index_members": index,
    }, indent=2))


if __name__ == "__main__":
    main()
