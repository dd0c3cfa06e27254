#!/usr/bin/env python3
"""Fairness across agents (issue 34): who gets a contended lock when its waiters sit on
different agents of the same masters. Figures only: it never fails on a figure.

    python3 bench/fairness.py [--seconds 20] [--warmup 2] [--hold-ms 5] [--ttl-ms 5000]
        [--wait-ms 10000] [--permits K] [--shape A,B,C ...] [--agent-setting KEY=VALUE ...]
        [--label L | --compare 'L1:KEY=VALUE,...;L2:...'] [--agent-bin PATH] [--out FILE]

One invocation starts 3 fresh redis-server masters on free loopback ports (no persistence) and,
per label, 3 agents A, B and C of the real binary sharing them (each its own Unix socket and
TOML config), then runs each shape for --seconds after --warmup seconds. A shape places clients
on the agents (default 1,2,1 and 1,8,3 on A,B,C); every client is its own connection and thread,
looping acquire (ttl_ms, wait_ms) -> hold --hold-ms -> release on one resource (a mutex, or a
semaphore of --permits). Only what happens inside the window counts: a grant or a timeout
counts when its reply arrives in it.

Per shape it prints, and appends as one JSON line to --out (default
<repo>/build/bench-results/fairness.jsonl):
- per client: grants, share (grants / (total grants / clients)), timeouts, other errors by
  code, and its wait at p50/p99/max. A client's waits are the waited_ms of its grants, the time
  from sending to the reply of its timed-out acquires, and the wait still open when the window
  ended (a lower bound, so a starved client is not left without a figure);
- Jain's index over the clients' grants ((sum x)^2 / (n sum x^2)), min/max grants ratio, the
  smallest share;
- per agent: p50/p99/max of the granted waits (waited_ms) and of the timed-out waits;
- cycles/s: grants in the window / its length.
Then the issue's goals beside the figures (never as pass or fail): min/max >= 0.5, and no
client's p99 wait above 1 s.

--agent-setting KEY=VALUE (repeatable; KEY as in docs/configuration.md, `_` or `-`) goes into
every agent's config. --compare runs the shapes once per label, each on 3 fresh agents with the
label's settings added (masters flushed between labels), so a knob is measured before and after
in one run. Every process started is stopped on exit, Ctrl-C and SIGTERM included. Exit status:
0 when every shape ran, 1 when the masters or agents could not be started.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENTS = "ABC"
MASTERS = 3
DEFAULT_SHAPES = ["1,2,1", "1,8,3"]
START_DEADLINE_S = 60
# Settings each agent's config carries before --agent-setting; the masters are fresh, so
# restart quarantine would keep them out of quorum for max_ttl_ms.
BASE_SETTINGS = {"restart_quarantine": False, "scan_interval_ms": 0, "log_level": "warn",
                 "admin_listen": "127.0.0.1:0"}
RESERVED = {"socket_path", "masters", "agent_name"}
GOAL_MIN_MAX = 0.5
GOAL_P99_MS = 1000


class SetupError(Exception):
    pass


def pct(values, p):
    """Nearest-rank percentile of values (None when empty)."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml_value(text):
    """A --agent-setting value as TOML: integers, floats and true/false bare, else a string."""
    if isinstance(text, bool):
        return "true" if text else "false"
    if isinstance(text, int):
        return str(text)
    if re.fullmatch(r"-?\d+", text) or re.fullmatch(r"-?\d+\.\d+", text) or text in ("true", "false"):
        return text
    return json.dumps(text)


def parse_settings(items, what):
    """KEY=VALUE strings -> {toml_key: value}; KEY may use - or _ and a leading --."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not eq or not key:
            raise SystemExit(f"fairness.py: {what} {item!r}: give KEY=VALUE")
        if key in RESERVED:
            raise SystemExit(f"fairness.py: {what} {item!r}: {key} is set by the bench itself")
        out[key] = value.strip()
    return out


def parse_compare(text):
    """'L1:K=V,K=V;L2:...' -> [(label, settings)]."""
    runs = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        label, colon, rest = part.partition(":")
        if not colon or not label.strip():
            raise SystemExit(f"fairness.py: --compare part {part!r}: give LABEL:KEY=VALUE,...")
        items = [i for i in (x.strip() for x in rest.split(",")) if i]
        runs.append((label.strip(), parse_settings(items, f"--compare {label.strip()}:")))
    if not runs:
        raise SystemExit("fairness.py: --compare names no label")
    return runs


class Processes:
    """Every child started; stop_all() ends them (SIGTERM, then SIGKILL after a grace)."""

    def __init__(self):
        self.children = []

    def start(self, argv, log_path, env=None):
        log = open(log_path, "ab")
        try:
            child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self.children.append(child)
        return child

    def stop(self, child, grace_s=5):
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(grace_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if child in self.children:
            self.children.remove(child)

    def stop_all(self):
        for child in list(self.children):
            self.stop(child)


def tail(path, lines=10):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True, timeout=10).stdout


def start_master(procs, run_dir, i):
    """A fresh redis-server on a free port; ready once it answers as this very process. A
    server that exits (its port taken meanwhile) is started again on another port, 5 times."""
    log = os.path.join(run_dir, f"redis-{i}.log")
    for _ in range(5):
        port = free_port()
        child = procs.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", run_dir], log)
        deadline = time.monotonic() + 30
        while child.poll() is None and time.monotonic() < deadline:
            if f"process_id:{child.pid}" in redis_cli(port, "info", "server").split():
                return port
            time.sleep(0.02)
        procs.stop(child)
    raise SetupError(f"redis-server {i} did not start (5 attempts); its log:\n{tail(log)}")


def request(path, msg, timeout=2.0):
    """One request on a fresh connection to an agent socket; its reply as a dict."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((json.dumps(msg) + "\n").encode())
        with s.makefile("rb") as f:
            while True:
                line = f.readline()
                if not line:
                    raise ConnectionError("closed")
                reply = json.loads(line)
                if "event" not in reply:
                    return reply


def start_agent(procs, run_dir, binary, name, ports, settings):
    """Agent `name` with its own config and socket; returns (process, socket path) once its
    health answer shows every master up and out of quarantine (the first shape must not meet a
    master still handshaking)."""
    sock = os.path.join(run_dir, f"agent-{name}.sock")
    conf = os.path.join(run_dir, f"agent-{name}.toml")
    log = os.path.join(run_dir, f"agent-{name}.log")
    values = {**BASE_SETTINGS, **settings}
    lines = [f"socket_path = {json.dumps(sock)}",
             "masters = [" + ", ".join(json.dumps(f"redis://127.0.0.1:{p}") for p in ports) + "]",
             f"agent_name = {json.dumps('fair-' + name)}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    # The agent refuses LOCKWARDEN_* variables that are not settings: it gets none.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKWARDEN_")}
    child = procs.start([binary, "serve", "--config", conf], log, env)
    deadline = time.monotonic() + START_DEADLINE_S
    last = "no answer"
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SetupError(f"agent {name} exited ({child.returncode}); its log:\n{tail(log)}")
        try:
            h = request(sock, {"id": 1, "op": "health"})
            usable = [n for n in h.get("nodes", []) if n.get("up") and not n.get("quarantined")]
            if h.get("ok") and len(usable) == len(ports):
                return child, sock
            last = json.dumps(h)
        except (OSError, ValueError) as e:
            last = str(e)
        time.sleep(0.02)
    raise SetupError(f"agent {name} not ready in {START_DEADLINE_S} s (last: {last}); "
                     f"its log:\n{tail(log)}")


class Client:
    """One connection looping acquire -> hold -> release. Records (reply time, figure):
    grants with waited_ms, timeouts with the ms from send to reply, other failures by code
    (pushed events such as `lost` among them)."""

    def __init__(self, name, agent, sock):
        self.name, self.agent, self.sock_path = name, agent, sock
        self.grants, self.timeouts, self.errors = [], [], []
        self.waiting_since = None  # monotonic send time of the acquire awaiting its reply
        self.conn = None

    def run(self, acquire, hold_s, stop):
        try:
            self.conn = socket.socket(socket.AF_UNIX)
            self.conn.connect(self.sock_path)
            reader = self.conn.makefile("rb")
            rid = 0

            def call(msg):
                nonlocal rid
                rid += 1
                self.conn.sendall((json.dumps({"id": rid, **msg}) + "\n").encode())
                while True:
                    line = reader.readline()
                    if not line:
                        raise ConnectionError("agent closed the connection")
                    reply = json.loads(line)
                    if "event" in reply:  # e.g. lost: counted with the errors
                        self.errors.append((time.monotonic(), f"event:{reply['event']}:"
                                            f"{reply.get('reason')}"))
                    elif reply.get("id") == rid:
                        return reply

            while not stop.is_set():
                self.waiting_since = sent = time.monotonic()
                reply = call(acquire)
                now = time.monotonic()
                self.waiting_since = None
                if reply.get("ok"):
                    self.grants.append((now, reply.get("waited_ms", 0)))
                    time.sleep(hold_s)
                    rel = call({"op": "release", "resource": acquire["resource"],
                                "token": reply["token"]})
                    if not rel.get("ok"):
                        self.errors.append((time.monotonic(), "release:" + str(rel.get("error"))))
                elif reply.get("error") == "timeout":
                    self.timeouts.append((now, round((now - sent) * 1000, 1)))
                else:
                    self.errors.append((now, str(reply.get("error"))))
                    time.sleep(0.01)  # no spinning on no_quorum and the like
        except (OSError, ValueError) as e:
            if not stop.is_set():
                self.errors.append((time.monotonic(), f"connection: {e}"))

    def close(self):
        if self.conn is not None:
            try:
                self.conn.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in a read
            except OSError:
                pass
            self.conn.close()


def run_shape(args, label, placement, agents, resource):
    """Runs one shape; returns its result dict."""
    clients = [Client(f"{a}{j + 1}", a, agents[a]) for a, n in zip(AGENTS, placement)
               for j in range(n)]
    acquire = {"op": "acquire", "resource": resource, "ttl_ms": args.ttl_ms,
               "wait_ms": args.wait_ms}
    if args.permits:
        acquire["permits"] = args.permits
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(acquire, args.hold_ms / 1000, stop),
                                daemon=True) for c in clients]
    for t in threads:
        t.start()
    try:
        t_start = time.monotonic() + args.warmup
        t_end = t_start + args.seconds
        time.sleep(max(0.0, t_end - time.monotonic()))
        open_waits = {c.name: (t_end - c.waiting_since) * 1000
                      for c in clients if c.waiting_since is not None and c.waiting_since < t_end}
    finally:
        stop.set()
        for c in clients:
            c.close()
        for t in threads:
            t.join(5)
    return summarize(args, label, placement, clients, t_start, t_end, open_waits)


def summarize(args, label, placement, clients, t_start, t_end, open_waits):
    inside = lambda events: [v for t, v in events if t_start <= t < t_end]  # noqa: E731
    rows = []
    for c in clients:
        granted, timed_out, errors = inside(c.grants), inside(c.timeouts), inside(c.errors)
        open_wait = open_waits.get(c.name)
        waits = granted + timed_out + ([open_wait] if open_wait is not None else [])
        codes = {}
        for e in errors:
            codes[e] = codes.get(e, 0) + 1
        rows.append({"client": c.name, "agent": c.agent, "grants": len(granted),
                     "timeouts": len(timed_out), "errors": codes,
                     "open_wait_ms": round(open_wait) if open_wait is not None else None,
                     "wait_p50_ms": pct(waits, 50), "wait_p99_ms": pct(waits, 99),
                     "wait_max_ms": max(waits) if waits else None,
                     "_granted": granted, "_timed_out": timed_out})
    grants = [r["grants"] for r in rows]
    total, n = sum(grants), len(rows)
    for r in rows:
        r["share"] = r["grants"] / (total / n) if total else None
    squares = sum(x * x for x in grants)
    agents = {}
    for a in AGENTS:
        mine = [r for r in rows if r["agent"] == a]
        if not mine:
            continue
        gw = [w for r in mine for w in r["_granted"]]
        tw = [w for r in mine for w in r["_timed_out"]]
        agents[a] = {"clients": len(mine), "grants": len(gw), "timeouts": len(tw),
                     "granted_wait_ms": {"p50": pct(gw, 50), "p99": pct(gw, 99),
                                         "max": max(gw) if gw else None},
                     "timed_out_wait_ms": {"p50": pct(tw, 50), "p99": pct(tw, 99),
                                           "max": max(tw) if tw else None}}
    for r in rows:
        del r["_granted"], r["_timed_out"]
    p99s = [r["wait_p99_ms"] for r in rows if r["wait_p99_ms"] is not None]
    return {
        "bench": "fairness", "label": label, "shape": "/".join(map(str, placement)),
        "clients_n": n, "seconds": round(t_end - t_start, 3), "hold_ms": args.hold_ms,
        "ttl_ms": args.ttl_ms, "wait_ms": args.wait_ms, "permits": args.permits,
        "grants": total, "cycles_per_s": total / (t_end - t_start),
        "jain": total * total / (n * squares) if squares else None,
        "min_max": min(grants) / max(grants) if max(grants) else None,
        "min_share": min(r["share"] for r in rows) if total else None,
        "worst_client_p99_wait_ms": max(p99s) if p99s else None,
        "timeouts": sum(r["timeouts"] for r in rows),
        "errors": sum(sum(r["errors"].values()) for r in rows),
        "clients": rows, "agents": agents,
    }


def print_shape(res):
    kind = f"semaphore of {res['permits']}" if res["permits"] else "mutex"
    print(f"\n[{res['label']}] {res['clients_n']} clients placed {res['shape']} on agents "
          f"A/B/C, one {kind}; {res['seconds']:.1f} s window, hold {res['hold_ms']} ms, "
          f"ttl {res['ttl_ms']} ms, wait {res['wait_ms']} ms")
    print(f"  {'client':<7}{'grants':>8}{'share':>8}{'timeouts':>10}{'wait p50':>10}"
          f"{'p99':>8}{'max':>8}{'open wait':>11}  errors")
    for r in res["clients"]:
        errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "-"
        print(f"  {r['client']:<7}{r['grants']:>8,}{fmt(r['share'], 2):>8}{r['timeouts']:>10}"
              f"{fmt(r['wait_p50_ms']):>10}{fmt(r['wait_p99_ms']):>8}{fmt(r['wait_max_ms']):>8}"
              f"{fmt(r['open_wait_ms']):>11}  {errs}")
    print(f"  {'agent':<7}{'clients':>8}{'grants':>8}{'granted wait p50':>18}{'p99':>8}"
          f"{'max':>8}{'timed out':>11}{'p50':>8}{'max':>8}   (ms)")
    for a, s in res["agents"].items():
        g, t = s["granted_wait_ms"], s["timed_out_wait_ms"]
        print(f"  {a:<7}{s['clients']:>8}{s['grants']:>8,}{fmt(g['p50']):>18}{fmt(g['p99']):>8}"
              f"{fmt(g['max']):>8}{s['timeouts']:>11}{fmt(t['p50']):>8}{fmt(t['max']):>8}")
    print(f"  Jain {fmt(res['jain'], 3)}   min/max {fmt(res['min_max'], 3)}   "
          f"min share {fmt(res['min_share'], 2)}   worst client p99 wait "
          f"{fmt(res['worst_client_p99_wait_ms'])} ms   {res['cycles_per_s']:,.1f} cycles/s   "
          f"timeouts {res['timeouts']}   errors {res['errors']}")


def print_goals(results):
    print(f"\nIssue 34's goals beside the figures (goals, not verdicts), hold {results[0]['hold_ms']} ms:")
    print(f"  {'label':<14}{'shape':<9}{'min/max (goal >= 0.5)':>24}{'min share':>11}"
          f"{'worst client p99 wait (goal <= 1,000 ms)':>43}{'Jain':>7}")
    for r in results:
        print(f"  {r['label']:<14}{r['shape']:<9}{fmt(r['min_max'], 3):>24}"
              f"{fmt(r['min_share'], 2):>11}{fmt(r['worst_client_p99_wait_ms']) + ' ms':>43}"
              f"{fmt(r['jain'], 3):>7}")


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or None
    except OSError:
        return None


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def parse_args(argv):
    p = argparse.ArgumentParser(description="Fairness across agents of the same masters "
                                "(figures only); see the module docstring.")
    p.add_argument("--seconds", type=float, default=20, help="window per shape (default 20)")
    p.add_argument("--warmup", type=float, default=2, help="seconds before each window (2)")
    p.add_argument("--hold-ms", type=float, default=5, help="hold per grant (default 5)")
    p.add_argument("--ttl-ms", type=int, default=5000)
    p.add_argument("--wait-ms", type=int, default=10000)
    p.add_argument("--permits", type=int, default=None,
                   help="a semaphore of K permits instead of the mutex")
    p.add_argument("--shape", action="append", default=None, metavar="A,B,C",
                   help="clients on agents A,B,C; repeatable (default 1,2,1 and 1,8,3)")
    p.add_argument("--agent-setting", action="append", default=[], metavar="KEY=VALUE",
                   help="added to every agent's config; repeatable")
    p.add_argument("--label", default="default", help="names the run (without --compare)")
    p.add_argument("--compare", metavar="'L1:K=V,...;L2:...'",
                   help="run the shapes once per label, on fresh agents with its settings")
    p.add_argument("--agent-bin", default=os.environ.get("LOCKWARDEN_BINARY",
                                                         os.path.join(ROOT, "build", "lockwarden")))
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench-results", "fairness.jsonl"))
    args = p.parse_args(argv)
    shapes = []
    for s in args.shape or DEFAULT_SHAPES:
        try:
            placement = [int(x) for x in s.split(",")]
        except ValueError:
            placement = []
        if len(placement) != len(AGENTS) or min(placement) < 0 or sum(placement) < 2:
            p.error(f"--shape {s}: give 3 counts (agents A,B,C), at least 2 clients in all")
        shapes.append(placement)
    args.shapes = shapes
    common = parse_settings(args.agent_setting, "--agent-setting")
    runs = parse_compare(args.compare) if args.compare else [(args.label, {})]
    args.runs = [(label, {**common, **own}) for label, own in runs]
    if not os.access(args.agent_bin, os.X_OK):
        p.error(f"agent binary {args.agent_bin} not found or not executable (--agent-bin)")
    return args


def interrupted(signum, frame):
    """SIGINT and SIGTERM end the run (cleanup included), even when started with SIGINT ignored."""
    raise KeyboardInterrupt


def main(argv):
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    procs = Processes()
    run_dir = tempfile.mkdtemp(prefix="lw-fair-")
    results = []
    meta = {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "cores": os.cpu_count(), "agent_bin": args.agent_bin, "load_before": loadavg()}
    try:
        print(f"lockwarden fairness bench: {MASTERS} masters, agents {'/'.join(AGENTS)}, "
              f"{os.cpu_count()} cores, commit {meta['commit']}, {args.seconds:g} s per shape "
              f"(+{args.warmup:g} s warm-up), load average {meta['load_before']}")
        ports = [start_master(procs, run_dir, i + 1) for i in range(MASTERS)]
        for label, settings in args.runs:
            for p in ports:
                redis_cli(p, "flushall")
            shown = ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"
            print(f"\n== {label}: agent settings {shown}")
            started, agents = [], {}
            try:
                for name in AGENTS:
                    child, sock = start_agent(procs, run_dir, args.agent_bin, name, ports, settings)
                    started.append(child)
                    agents[name] = sock
                for placement in args.shapes:
                    kind = f"sem{args.permits}" if args.permits else "mutex"
                    resource = f"fair/{label}/{'-'.join(map(str, placement))}/{kind}"
                    res = run_shape(args, label, placement, agents, resource)
                    res.update(meta, settings=settings)
                    results.append(res)
                    print_shape(res)
            finally:
                for child in started:
                    procs.stop(child)
        meta["load_after"] = loadavg()
        print_goals(results)
        print(f"\nload average before {meta['load_before']}, after {meta['load_after']}")
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "a") as f:
            for r in results:
                f.write(json.dumps({**r, "load_after": meta["load_after"]}) + "\n")
        print(f"results appended to {args.out}")
        for a in AGENTS:
            log = os.path.join(run_dir, f"agent-{a}.log")
            if os.path.exists(log) and os.path.getsize(log) > 0:
                print(f"agent-{a}.log (warn and above), last lines:\n{tail(log, 3)}", end="")
        return 0
    except SetupError as e:
        print(f"fairness.py: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nfairness.py: interrupted; stopping what it started", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
