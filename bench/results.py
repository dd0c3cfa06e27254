#!/usr/bin/env python3
"""Turns bench/run.sh's results.jsonl into the markdown table of bench/README.md.

    python3 bench/results.py results.jsonl [--smoke 0|1] [--note TEXT]
        [--kinds-only | --upgrade-only]

Each line of the input is one part's result (lw_bench, lw_bench_raw, redlock_bench.mjs or
idle_cost.py), labelled "<shape> <bench>" (or "idle", "hold", "upgrade"). Ratios are computed
from this one run only. The goals table is issue 21's, with the rows of issue 7's that still
apply, and the upgrade part's.
"""
import argparse
import json

SHAPES = [
    ("c1", "1 client, uncontended"),
    ("c64", "64 clients, uncontended"),
    ("c16-on-1", "16 clients on 1 resource"),
    ("mixed64", "64 clients, mixed (10% on 4 hot keys)"),
]
BENCHES = ["agent", "agent-script", "raw", "raw-script", "node", "node-autopipe", "etcd"]
# agent-script (the agent with mark_readers = false: every exclusive acquire the claim script, as
# before issue 37) and raw-script: c1 and c64 only; etcd: when etcd-server is installed, not
# mixed64.
OPTIONAL_BENCHES = {"agent-script", "raw-script", "etcd"}


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "n/a"


def us(v):
    if v is None:
        return "–"
    if v < 1000:
        return f"{v:.0f} µs"
    return f"{v / 1000:.2f} ms" if v < 10000 else f"{v / 1000:.1f} ms"


def us_per_cycle(r, key):
    """A `<who>_cpu_s_per_1k` figure as µs per cycle (None when absent)."""
    v = (r or {}).get(key)
    return None if v is None else v * 1000


def cpu_us(v):
    return "–" if v is None else f"{v:.1f} µs"


def server_cpu(r):
    """The masters' (or etcd members') CPU s per 1,000 cycles of part r, as text."""
    v = r.get("redis_cpu_s_per_1k", r.get("etcd_cpu_s_per_1k"))
    return "–" if v is None else f"{v:.3f}"


# The semaphore beside redis-semaphore's RedlockSemaphore on the same masters (issue 37).
SEMAPHORE_PEERS = [("sem-c64", "semaphore K=4, 64 clients, each its own"),
                   ("sem4-c16", "semaphore K=4, 16 clients on 1 resource")]


def semaphore_peer_table(rows):
    out = ["| part | bench | cycles/s | × redis-semaphore | acquire p50 | p99 | redis CPU s / 1k "
           "| failed |", "|---|---|---|---|---|---|---|---|"]
    for shape, desc in SEMAPHORE_PEERS:
        peer = rows.get(f"{shape} redis-semaphore", {})
        for bench in ("agent", "redis-semaphore"):
            r = rows.get(f"{shape} {bench}")
            if r is None:
                out.append(f"| {desc} | {bench} | (did not run) ||||||")
                continue
            out.append("| " + " | ".join([
                desc, bench, f"{r['cycles_per_s']:,.0f}",
                ratio(r["cycles_per_s"], peer.get("cycles_per_s")), us(r.get("acquire_us_p50")),
                us(r.get("acquire_us_p99")), server_cpu(r), str(r.get("failed", "?"))]) + " |")
    return out


def cpu_cells(r, base):
    """Agent and redis CPU per cycle of part r, each with its ratio to part base."""
    cells = []
    for key in ("agent_cpu_s_per_1k", "redis_cpu_s_per_1k"):
        v = us_per_cycle(r, key)
        cells += [cpu_us(v), ratio(v, us_per_cycle(base, key))]
    return cells


# The other kinds uncontended (issue 21), each against the mutex's c64 part of the same run.
KINDS_UNCONTENDED = [
    ("c64 agent", "mutex, 64 clients, each its own resource (baseline)"),
    ("sem-c64 agent", "semaphore K=4, 64 clients, each its own"),
    ("rw-c64 agent", "read-write, 64 clients, each a read hold on its own"),
]


def uncontended_kinds_table(rows):
    base = rows.get(KINDS_UNCONTENDED[0][0], {})
    out = ["| part (uncontended) | cycles/s | acquire p50 | agent CPU / cycle | × mutex | "
           "redis CPU / cycle | × mutex | failed |",
           "|---|---|---|---|---|---|---|---|"]
    for label, desc in KINDS_UNCONTENDED:
        r = rows.get(label)
        if r is None:
            out.append(f"| {desc} | (did not run) |||||||")
            continue
        out.append("| " + " | ".join(
            [desc, f"{r['cycles_per_s']:,.0f}", us(r.get("acquire_us_p50"))]
            + cpu_cells(r, base) + [str(r.get("failed", "?"))]) + " |")
    return out


def idle_text(idle):
    """One sentence on the idle part, or None when it did not run."""
    if not idle:
        return None
    return (f"agent {idle['agent_cpu_pct']:.2f} % of one core "
            f"({idle['agent_sched_cpu_pct']:.3f} % by scheduler run time), RSS "
            f"{idle['agent_rss_kib'] / 1024:.1f} MiB (max {idle['agent_rss_max_kib'] / 1024:.1f}); "
            f"the 5 masters {idle['masters_cpu_pct']:.2f} % of one core "
            f"({idle['masters_sched_cpu_pct']:.3f} % by run time; their own background work "
            f"included), "
            f"{idle['masters_commands_per_s']:.1f} commands/s from the agent")


# The other kinds (issue 18), each against the mutex's 16-on-1 part of the same run.
KINDS = [
    ("c16-on-1 agent", "mutex, 16 clients on 1 resource (baseline)", []),
    ("sem4-c16 agent", "semaphore K=4, 16 clients on 1 resource", ["permit"]),
    ("rw15+1 agent", "read-write, 15 readers + 1 writer on 1 resource", ["read", "write"]),
]


def kinds_table(rows):
    base = rows.get(KINDS[0][0], {})
    out = ["| part | cycles/s | × mutex | wait p50 | wait p99 | × mutex | wait p99 by role | "
           "hand-off p50 / p99 | agent CPU s / 1k | redis CPU s / 1k | failed |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, desc, roles in KINDS:
        r = rows.get(label)
        if r is None:
            out.append(f"| {desc} | (did not run) ||||||||||")
            continue
        by_role = ", ".join(f"{role} {us(r.get(f'wait_{role}_us_p99'))} "
                            f"({r.get(f'wait_{role}_samples', 0):,.0f})" for role in roles)
        cpu = r.get("agent_cpu_s_per_1k")
        out.append("| " + " | ".join([
            desc, f"{r['cycles_per_s']:,.0f}",
            ratio(r["cycles_per_s"], base.get("cycles_per_s")),
            us(r.get("wait_us_p50")), us(r.get("wait_us_p99")),
            ratio(r.get("wait_us_p99"), base.get("wait_us_p99")),
            by_role or "–",
            f"{us(r.get('handoff_us_p50'))} / {us(r.get('handoff_us_p99'))}",
            f"{cpu:.3f}" if cpu is not None else "–",
            f"{r['redis_cpu_s_per_1k']:.3f}" if "redis_cpu_s_per_1k" in r else "–",
            str(r.get("failed", "?")),
        ]) + " |")
    return out


TLS_SHAPES = [s for s in SHAPES if s[0] != "mixed64"]


def tls_table(rows):
    out = ["| shape | transport | cycles/s | × plain | acquire p50 | p99 | × plain (p50) | "
           "agent CPU / cycle | × plain | redis CPU / cycle | × plain | failed |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for shape, desc in TLS_SHAPES:
        plain = rows.get(f"{shape} agent", {})
        for label, transport in ((f"{shape} agent", "plain"), (f"{shape} agent-tls", "TLS")):
            r = rows.get(label)
            if r is None:
                out.append(f"| {desc} | {transport} | (did not run) ||||||||||")
                continue
            p50 = r.get("acquire_us_p50") or r.get("wait_us_p50")
            p99 = r.get("acquire_us_p99") or r.get("wait_us_p99")
            base_p50 = plain.get("acquire_us_p50") or plain.get("wait_us_p50")
            out.append("| " + " | ".join(
                [desc, transport, f"{r['cycles_per_s']:,.0f}",
                 ratio(r["cycles_per_s"], plain.get("cycles_per_s")), us(p50), us(p99),
                 ratio(p50, base_p50)]
                + cpu_cells(r, plain) + [str(r.get("failed", "?"))]) + " |")
    return out


def scale_table(rows):
    out = ["| sessions | cycles/s | acquire p50 | p99 | agent CPU / cycle | redis CPU / cycle "
           "(5 masters) | failed |", "|---|---|---|---|---|---|---|"]
    for c in (1, 8, 64, 512, 4096):
        r = rows.get(f"scale-c{c} agent")
        if r is None:
            out.append(f"| {c:,} | (did not run) ||||||")
            continue
        out.append("| " + " | ".join([
            f"{c:,}", f"{r['cycles_per_s']:,.0f}", us(r.get("acquire_us_p50")),
            us(r.get("acquire_us_p99")), cpu_us(us_per_cycle(r, "agent_cpu_s_per_1k")),
            cpu_us(us_per_cycle(r, "redis_cpu_s_per_1k")), str(r.get("failed", "?"))]) + " |")
    return out


def ms(us_value):
    return "–" if us_value is None else f"{us_value / 1000:.1f} ms"


def upgrade_rows(up):
    """The upgrade part's goal rows (the note's figures), or [] when it did not run."""
    if not up:
        return []
    size = (f"{up.get('sessions', 0):,.0f} sessions holding {up.get('locks', 0):,.0f} renewed "
            f"locks; {up.get('load_sessions', 0):,.0f} of them asking, a request every "
            f"{up.get('think_ms', 0):,.0f} ms each")
    if not up.get("upgrade_ok"):
        return [f"| upgrade in place ({size}) | ≤ 100 ms at p99, 0 lost | "
                f"**the upgrade failed**: {up.get('upgrade_error', '?')} |"]
    # One lost lock shows in each of these at most once; the largest is the count.
    lost = max(up.get("lost_events", 0), up.get("release_not_held", 0),
               up.get("locks", 0) - up.get("held_listed", 0))
    return [
        f"| upgrade in place ({size}): request latency across the hand-over, p99 | ≤ 100 ms | "
        f"{ms(up.get('across_us_p99'))} (p50 {ms(up.get('across_us_p50'))}, max "
        f"{ms(up.get('across_us_max'))}, {up.get('across_requests', 0):,.0f} requests; before: "
        f"p99 {ms(up.get('before_us_p99'))}, after: p99 {ms(up.get('after_us_p99'))}) |",
        f"| upgrade in place: locks lost | 0 | {lost:,.0f} (lost events "
        f"{up.get('lost_events', 0):,.0f}; `held` listed {up.get('held_listed', 0):,.0f} of "
        f"{up.get('locks', 0):,.0f}; release not_held {up.get('release_not_held', 0):,.0f}; "
        f"connections broken {up.get('broken_connections', 0):,.0f}; pid "
        f"{up.get('previous_pid', 0):.0f} → {up.get('new_pid', 0):.0f}) |",
    ]


def upgrade_text(up):
    return (f"Upgrade: the hand-over took {up.get('upgrade_wall_ms', 0):,.1f} ms from sending "
            f"`upgrade` to its reply (the reply's handover_ms {up.get('handover_ms', 0):,.0f}); "
            f"longest request {up.get('longest_ms', 0):,.1f} ms ({up.get('longest_op', '?')}, "
            f"sent {up.get('longest_sent_ms', 0):,.1f} ms after `upgrade`); longest stretch "
            f"with no reply at all {up.get('reply_gap_max_ms', 0):,.1f} ms; "
            f"{up.get('handed_sessions', 0):,.0f} sessions and {up.get('handed_locks', 0):,.0f} "
            f"locks handed over; agent RSS {up.get('rss_before_kib', 0) / 1024:.1f} MiB before, "
            f"{up.get('rss_after_kib', 0) / 1024:.1f} MiB after (the new process); renewals: "
            f"{up.get('late_samples', 0):,.0f} late of {up.get('pttl_samples', 0):,.0f} PTTL "
            f"samples, worst {up.get('late_max_ms', 0):,.0f} ms; load failures "
            f"{up.get('load_failed', 0):,.0f}.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--smoke", default="0")
    ap.add_argument("--note", default="")
    ap.add_argument("--kinds-only", action="store_true")
    ap.add_argument("--upgrade-only", action="store_true")
    ap.add_argument("--tls-only", action="store_true")
    ap.add_argument("--scale-only", action="store_true")
    a = ap.parse_args()
    rows = {}
    with open(a.jsonl) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                rows[r.get("label", "?")] = r
    if a.kinds_only:
        print("\n".join(["### Semaphore and read-write beside the mutex", "",
                         f"One run of `bash bench/run.sh --kinds`: {a.note}.", "",
                         "Uncontended (issue 21's goal: agent CPU per cycle ≤ 1.5× the "
                         "mutex's):", ""]
                        + uncontended_kinds_table(rows)
                        + ["", "Contended, one resource:", ""]
                        + kinds_table(rows)))
        return

    if a.scale_only:
        print("\n".join(["### How cost grows with sessions", "",
                         f"One run of `bash bench/run.sh --scale`: {a.note}.", "",
                         "The uncontended mutex (each session its own resource) through one "
                         "agent (max_connections 5000).", ""] + scale_table(rows)))
        return

    if a.tls_only:
        print("\n".join(["### TLS to the masters", "",
                         f"One run of `bash bench/run.sh --tls`: {a.note}.", "",
                         "Each shape through an agent on the masters' plain ports, then through "
                         "one on their TLS ports (the same processes). × plain: the TLS part "
                         "over the plain one.", ""]
                        + tls_table(rows)))
        return

    if a.upgrade_only:
        up = rows.get("upgrade")
        print("\n".join(["### Upgrade in place", "",
                         f"One run of `bash bench/run.sh --upgrade`: {a.note}.", "",
                         "| goal | target | this run |", "|---|---|---|"]
                        + (upgrade_rows(up) or ["| upgrade in place | | (did not run) |"])
                        + (["", upgrade_text(up)] if up and up.get("upgrade_ok") else [])))
        return

    def get(shape, bench, key):
        return rows.get(f"{shape} {bench}", {}).get(key)

    out = []
    title = "Results" + (" (SMOKE run: tiny, figures meaningless)" if a.smoke == "1" else "")
    out.append(f"### {title}")
    out.append("")
    if a.note:
        out.append(f"One run of `bash bench/run.sh`: {a.note}.")
        out.append("")
    out.append("| shape | bench | cycles/s | acquire p50 | p90 | p99 | max | wait p99 | "
               "hand-off p50 / p99 | agent CPU s / 1k | server CPU s / 1k (redis; etcd's for "
               "etcd) | bench CPU s / 1k | failed |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, desc in SHAPES:
        for bench in BENCHES:
            r = rows.get(f"{shape} {bench}")
            if r is None and bench in OPTIONAL_BENCHES:
                continue
            if r is None:
                out.append(f"| {desc} | {bench} | (did not run) ||||||||||")
                continue
            contended = "wait_us_p99" in r
            cpu = r.get("agent_cpu_s_per_1k")
            out.append("| " + " | ".join([
                desc, bench, f"{r['cycles_per_s']:,.0f}",
                us(r["acquire_us_p50"]), us(r["acquire_us_p90"]), us(r["acquire_us_p99"]),
                us(r["acquire_us_max"]),
                us(r["wait_us_p99"]) if contended else "–",
                f"{us(r['handoff_us_p50'])} / {us(r['handoff_us_p99'])}" if contended else "–",
                f"{cpu:.3f}" if cpu is not None else "–",
                server_cpu(r),
                f"{r['bench_cpu_s_per_1k']:.3f}" if "bench_cpu_s_per_1k" in r else "–",
                str(r.get("failed", "?")),
            ]) + " |")
    out.append("")
    idle = rows.get("idle")
    if idle_text(idle):
        out.append(f"Idle (a fresh agent, 5 masters, nothing asked for {idle['seconds']} s): "
                   f"{idle_text(idle)}.")
        out.append("")
    out.append("Semaphore and read-write beside the mutex (the agent, same run), uncontended:")
    out.append("")
    out.extend(uncontended_kinds_table(rows))
    out.append("")
    out.append("and contended, on one resource:")
    out.append("")
    out.extend(kinds_table(rows))
    out.append("")
    out.append("The semaphore beside redis-semaphore's RedlockSemaphore (same masters, same shapes):")
    out.append("")
    out.extend(semaphore_peer_table(rows))
    out.append("")

    def best_node(shape, key, lower_is_better):
        """The better of node and node-autopipe: (value, which), or (None, None)."""
        vals = [(v, b) for b in ("node", "node-autopipe") if (v := get(shape, b, key))]
        if not vals:
            return None, None
        return min(vals) if lower_is_better else max(vals)

    c64 = get("c64", "agent", "cycles_per_s")
    c64_agent = us_per_cycle(rows.get("c64 agent"), "agent_cpu_s_per_1k")
    c64_redis = us_per_cycle(rows.get("c64 agent"), "redis_cpu_s_per_1k")
    p50 = get("c1", "agent", "acquire_us_p50")
    node_p50, node_p50_by = best_node("c1", "acquire_us_p50", True)
    cont = get("c16-on-1", "agent", "cycles_per_s")
    node_cont, node_cont_by = best_node("c16-on-1", "cycles_per_s", False)
    wait99 = get("c16-on-1", "agent", "wait_us_p99")
    hold = rows.get("hold", {})
    hm = rows.get("hold-metrics", {})
    out.append("| goal (issues 21 and 37; the last rows: issue 7's) | target | this run |")
    out.append("|---|---|---|")
    script_redis = us_per_cycle(rows.get("c64 agent-script"), "redis_cpu_s_per_1k")
    out.append(f"| uncontended C=64: agent CPU per cycle (the masters' beside it) | ≤ 14 µs | "
               f"{cpu_us(c64_agent)} (redis {cpu_us(c64_redis)}) |")
    out.append(f"| uncontended C=64: the 5 masters' CPU per cycle (issue 37; beside it, the "
               f"agent sending the claim script, agent-script) | ≤ 15 µs | {cpu_us(c64_redis)} "
               f"(agent-script {cpu_us(script_redis)}; {ratio(c64_redis, script_redis)}) |")
    out.append(f"| uncontended C=64 cycles/s: agent / agent-script (issue 37) | (context) | "
               f"{ratio(c64, get('c64', 'agent-script', 'cycles_per_s'))} |")
    out.append(f"| uncontended C=64 cycles/s: agent / node-redlock auto-pipelined | ≥ 2.5× | "
               f"{ratio(c64, get('c64', 'node-autopipe', 'cycles_per_s'))} |")
    out.append(f"| uncontended C=64 cycles/s: agent / raw pipelined hiredis loop | ≥ 0.80× | "
               f"{ratio(c64, get('c64', 'raw', 'cycles_per_s'))} |")
    out.append(f"| uncontended C=64 cycles/s: agent / raw loop sending the agent's own "
               f"acquire script (raw-script) | (context) | "
               f"{ratio(c64, get('c64', 'raw-script', 'cycles_per_s'))} |")
    out.append(f"| C=1 acquire p50: agent / node-redlock (the better of plain and "
               f"auto-pipelined; issue 37: ≤ 0.8×, the raw loop's place) | ≤ 0.8× | "
               f"{ratio(p50, node_p50)} ({us(p50)} vs "
               f"{us(node_p50)}, {node_p50_by or 'n/a'}) |")
    out.append(f"| contended 16-on-1 cycles/s: agent / node-redlock (the better of the two) | "
               f"≥ 10× | {ratio(cont, node_cont)} (vs {node_cont_by or 'n/a'}) |")
    etcd_p50 = get("c1", "etcd", "acquire_us_p50")
    out.append(f"| uncontended C=64 cycles/s: agent / etcd (issue 37) | ≥ 10× | "
               f"{ratio(c64, get('c64', 'etcd', 'cycles_per_s'))} |")
    out.append(f"| C=1 acquire p50: agent / etcd (issue 37) | ≤ 0.2× | {ratio(p50, etcd_p50)} "
               f"({us(p50)} vs {us(etcd_p50)}) |")
    for label, kind in (("sem-c64 agent", "semaphore (K=4)"), ("rw-c64 agent", "read hold")):
        agent = us_per_cycle(rows.get(label), "agent_cpu_s_per_1k")
        redis = us_per_cycle(rows.get(label), "redis_cpu_s_per_1k")
        out.append(f"| uncontended C=64: {kind} agent CPU per cycle / the mutex's | ≤ 1.5× | "
                   f"{ratio(agent, c64_agent)} ({cpu_us(agent)} vs {cpu_us(c64_agent)}; redis "
                   f"{ratio(redis, c64_redis)}: {cpu_us(redis)} vs {cpu_us(c64_redis)}) |")
    out.append(f"| idle agent (fresh, 5 masters): CPU, RSS, and the masters' CPU | near zero "
               f"(was 0.12 % of a core, 12.5 MiB) | {idle_text(idle) or '(did not run)'} |")
    out.append(f"| contended 16-on-1 wait p99 (agent) | ≤ 5 ms | {us(wait99)} |")
    out.extend(upgrade_rows(rows.get("upgrade")))
    if hold:
        mib = hold.get("rss_hold_max_kib", 0) / 1024
        out.append(f"| hold {hold.get('locks', 0):,.0f} renewed locks over "
                   f"{hold.get('sessions', 0):,.0f} sessions: agent RSS (max while held) | "
                   f"≤ 64 MiB | {mib:.1f} MiB ({hold.get('acquired', 0):,.0f} acquired, "
                   f"{hold.get('acquire_failed', 0):,.0f} failed) |")
        out.append(f"| hold: late renewals (PTTL sampled on master 1, > 100 ms past 2/3 ttl) | 0 | "
                   f"{hold.get('late_samples', 0):,.0f} of {hold.get('pttl_samples', 0):,.0f} "
                   f"samples ({hold.get('late_keys', 0):,.0f} keys), worst "
                   f"{hold.get('late_max_ms', 0):,.0f} ms "
                   f"late; PTTL < ttl/3: {hold.get('below_third_samples', 0):,.0f}; lost: "
                   f"{hold.get('lost_events', 0):,.0f}; release not_held: "
                   f"{hold.get('release_not_held', 0):,.0f} |")
        out.append("")
        out.append(f"Hold: ttl {hold.get('ttl_ms', 0):,.0f} ms, held "
                   f"{hold.get('hold_seconds', 0)} s "
                   f"after {hold.get('acquire_seconds', 0)} s of acquiring (acquire p50 "
                   f"{us(hold.get('acquire_us_p50'))}, p99 {us(hold.get('acquire_us_p99'))}); "
                   f"agent RSS {hold.get('rss_start_kib', 0) / 1024:.1f} MiB before, "
                   f"{hold.get('rss_hold_end_kib', 0) / 1024:.1f} MiB at the end of the hold, "
                   f"peak (VmHWM) {hold.get('hwm_kib', 0) / 1024:.1f} MiB; agent CPU during the "
                   f"hold {hold.get('agent_cpu_hold_s', 0)} s; renewals counted by the agent: "
                   f"{hm.get('renewals_extended', '?')} extended, {hm.get('renewals_retry', '?')} "
                   f"retried; min PTTL seen {hold.get('min_pttl_ms', 0):,.0f} ms, missing-key "
                   f"samples {hold.get('missing_samples', 0):,.0f}.")
    if rows.get("upgrade", {}).get("upgrade_ok"):
        out.append("")
        out.append(upgrade_text(rows["upgrade"]))
    print("\n".join(out))


if __name__ == "__main__":
    main()
