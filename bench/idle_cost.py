#!/usr/bin/env python3
"""What an agent that serves nothing costs: its CPU and RSS, and its masters' CPU and commands.

    python3 bench/idle_cost.py --agent-pid P --redis-pids P1,... --redis-ports N1,...
                               [--seconds S] [--label L] [--json FILE]

Run it on a fresh agent that is ready (every master usable) and that nobody else talks to.
Over S seconds (default 10) it reads, at the start and the end, utime+stime of the agent and of
the masters (/proc/PID/stat, whole process, clock ticks) and their scheduler run time
(/proc/PID/task/*/schedstat, nanoseconds: finer than a tick); it samples the agent's VmRSS
every 250 ms; before and after the window it reads each master's total_commands_processed
(INFO stats; the first of these INFO calls is counted by the second and is taken off).

Prints one `key=value` line and appends it as JSON to --json. Figures only: exit status 0
unless a process is gone or a figure cannot be read (then 1, with the reason on stderr).
"""
import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def stat_seconds(pid):
    """utime+stime of the whole process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    # rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(rest[11]) + int(rest[12])) / TICK


def sched_seconds(pid):
    """Run time of every thread of the process (schedstat), in seconds."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def commands_processed(port):
    info = subprocess.run(["redis-cli", "-p", str(port), "info", "stats"], check=True,
                          capture_output=True, text=True).stdout
    for line in info.splitlines():
        if line.startswith("total_commands_processed:"):
            return int(line.split(":")[1])
    raise RuntimeError(f"no total_commands_processed from the master on port {port}")


def cpu(pids):
    return (sum(stat_seconds(p) for p in pids), sum(sched_seconds(p) for p in pids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent-pid", type=int, required=True)
    ap.add_argument("--redis-pids", required=True)
    ap.add_argument("--redis-ports", required=True)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--label", default="idle")
    ap.add_argument("--json")
    a = ap.parse_args()
    redis = [int(p) for p in a.redis_pids.split(",")]
    ports = [int(p) for p in a.redis_ports.split(",")]

    cmds0 = [commands_processed(p) for p in ports]
    t0 = time.monotonic()
    agent0, masters0 = cpu([a.agent_pid]), cpu(redis)
    rss = [rss_kib(a.agent_pid)]
    while (left := a.seconds - (time.monotonic() - t0)) > 0:
        time.sleep(min(0.25, left))
        rss.append(rss_kib(a.agent_pid))
    agent1, masters1 = cpu([a.agent_pid]), cpu(redis)
    window = time.monotonic() - t0
    cmds1 = [commands_processed(p) for p in ports]
    commands = sum(c1 - c0 - 1 for c0, c1 in zip(cmds0, cmds1))

    def pct(before, after, i):
        return round(100 * (after[i] - before[i]) / window, 4)

    r = {
        "bench": "idle", "label": a.label, "seconds": round(window, 3),
        "agent_cpu_pct": pct(agent0, agent1, 0), "agent_sched_cpu_pct": pct(agent0, agent1, 1),
        "agent_rss_kib": rss[-1], "agent_rss_max_kib": max(rss),
        "masters_cpu_pct": pct(masters0, masters1, 0),
        "masters_sched_cpu_pct": pct(masters0, masters1, 1),
        "masters_commands": commands,
        "masters_commands_per_s": round(commands / window, 2),
        "tick_s": 1 / TICK,
    }
    print(" ".join(f"{k}={v}" for k, v in r.items()))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    try:
        main()
    except (OSError, RuntimeError, ValueError, subprocess.CalledProcessError) as e:
        print(f"idle_cost.py: {e}", file=sys.stderr)
        sys.exit(1)
