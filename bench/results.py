#!/usr/bin/env python3
"""Turns bench/run.sh's results.jsonl into the markdown table of bench/README.md.

    python3 bench/results.py results.jsonl [--smoke 0|1] [--note TEXT] [--kinds-only]

Each line of the input is one part's result (lw_bench, lw_bench_raw or redlock_bench.mjs),
labelled "<shape> <bench>". Ratios are computed from this one run only.
"""
import argparse
import json

SHAPES = [
    ("c1", "1 client, uncontended"),
    ("c64", "64 clients, uncontended"),
    ("c16-on-1", "16 clients on 1 resource"),
    ("mixed64", "64 clients, mixed (10% on 4 hot keys)"),
]
BENCHES = ["agent", "raw", "node", "node-autopipe"]


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "n/a"


def us(v):
    if v is None:
        return "–"
    if v < 1000:
        return f"{v:.0f} µs"
    return f"{v / 1000:.2f} ms" if v < 10000 else f"{v / 1000:.1f} ms"


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--smoke", default="0")
    ap.add_argument("--note", default="")
    ap.add_argument("--kinds-only", action="store_true")
    a = ap.parse_args()
    rows = {}
    with open(a.jsonl) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                rows[r.get("label", "?")] = r
    if a.kinds_only:
        print("\n".join(["### Semaphore and read-write beside the mutex", "",
                         f"One run of `bash bench/run.sh --kinds`: {a.note}.", ""]
                        + kinds_table(rows)))
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
               "hand-off p50 / p99 | agent CPU s / 1k | redis CPU s / 1k | bench CPU s / 1k "
               "| failed |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, desc in SHAPES:
        for bench in BENCHES:
            r = rows.get(f"{shape} {bench}")
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
                f"{r['redis_cpu_s_per_1k']:.3f}" if "redis_cpu_s_per_1k" in r else "–",
                f"{r['bench_cpu_s_per_1k']:.3f}" if "bench_cpu_s_per_1k" in r else "–",
                str(r.get("failed", "?")),
            ]) + " |")
    out.append("")
    out.append("Semaphore and read-write beside the mutex (the agent, same run):")
    out.append("")
    out.extend(kinds_table(rows))
    out.append("")

    def best_node(shape, key, lower_is_better):
        vals = [v for v in (get(shape, "node", key), get(shape, "node-autopipe", key)) if v]
        if not vals:
            return None
        return min(vals) if lower_is_better else max(vals)

    c64 = get("c64", "agent", "cycles_per_s")
    p50 = get("c1", "agent", "acquire_us_p50")
    node_p50 = best_node("c1", "acquire_us_p50", True)
    cont = get("c16-on-1", "agent", "cycles_per_s")
    node_cont = best_node("c16-on-1", "cycles_per_s", False)
    wait99 = get("c16-on-1", "agent", "wait_us_p99")
    hold = rows.get("hold", {})
    hm = rows.get("hold-metrics", {})
    out.append("| goal (issue 7) | target | this run |")
    out.append("|---|---|---|")
    out.append(f"| uncontended C=64: agent / node-redlock auto-pipelined | ≥ 2.5× | "
               f"{ratio(c64, get('c64', 'node-autopipe', 'cycles_per_s'))} |")
    out.append(f"| uncontended C=64: agent / raw limit | ≥ 0.50× | "
               f"{ratio(c64, get('c64', 'raw', 'cycles_per_s'))} |")
    out.append(f"| C=1 acquire p50: agent / node-redlock (better of the two) | ≤ 0.6× | "
               f"{ratio(p50, node_p50)} ({us(p50)} vs {us(node_p50)}) |")
    out.append("| contended 16-on-1 cycles/s: agent / node-redlock (better of the two) | ≥ 5× | "
               f"{ratio(cont, node_cont)} |")
    out.append(f"| contended 16-on-1 wait p99 (agent) | ≤ 5 ms | {us(wait99)} |")
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
    print("\n".join(out))


if __name__ == "__main__":
    main()
