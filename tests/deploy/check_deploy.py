#!/usr/bin/python3
"""Static checks of deploy/ (systemd unit, Kubernetes manifests, Compose files, Dockerfile).

    /usr/bin/python3 tests/deploy/check_deploy.py --root REPO --bin build/lockwarden

Exits 1 with one line per problem, 0 when everything passes. What is proved, and what is not,
is said next to each check and in deploy/README.md: nothing here starts systemd, Kubernetes or
Docker. Needs Debian's python3-yaml, systemd (systemd-analyze, systemd-sysusers), promtool.
"""

import argparse
import configparser
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

problems = []


def fail(where, what):
    problems.append(f"{where}: {what}")


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


class Secrets:
    """Stand-ins for the secret files a config names: 0600, in a temporary directory."""

    def __init__(self, tmp):
        self.password = os.path.join(tmp, "redis-password")
        self.token = os.path.join(tmp, "admin-token")
        for path, text in ((self.password, "stand-in-password\n"),
                           (self.token, "stand-in-admin-token-0123456789\n")):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(text)


def check_config(where, binary, toml_path, secrets, token_flag=False):
    """The agent's own validation (`serve --check-config`): every key known, every value valid,
    access rules and socket owner/group resolvable. The secret paths of the file point where the
    deployment mounts them, which do not exist here: flags replace them with stand-ins (the
    paths themselves are checked against the mounts by the caller)."""
    argv = [binary, "serve", "--config", toml_path, "--check-config"]
    text = open(toml_path).read()
    if re.search(r"^\s*redis_password_file\s*=", text, re.M):
        argv += ["--redis-password-file", secrets.password]
    # token_flag: the deployment gives --admin-token-file on the command line, not in the file.
    if token_flag or re.search(r"^\s*admin_token_file\s*=", text, re.M):
        argv += ["--admin-token-file", secrets.token]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKWARDEN_")}
    r = run(argv, env=env)
    if r.returncode != 0:
        fail(where, f"lockwarden serve --check-config refused it: {(r.stderr or r.stdout).strip()}")
    return r.returncode == 0


def toml_value(text, key):
    """A top-level string or integer setting of a lockwarden TOML file (as the agent accepts
    them: one `key = value` per line), or None."""
    m = re.search(rf'^\s*{key}\s*=\s*(?:"([^"]*)"|(\d+))', text, re.M)
    if not m:
        return None
    return m.group(1) if m.group(1) is not None else int(m.group(2))


# --- systemd -------------------------------------------------------------------------------

UNIT_REQUIRED = {
    "Type": "notify", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
    "ProtectHome": "yes", "CapabilityBoundingSet": "",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6", "RuntimeDirectory": "lockwarden",
}


def check_systemd(root, binary, tmp, secrets):
    d = os.path.join(root, "deploy/systemd")
    unit_path = os.path.join(d, "lockwarden.service")
    where = "deploy/systemd/lockwarden.service"
    text = open(unit_path).read()

    # systemd-analyze verify loads the unit as systemd would: unknown sections or keys, bad
    # values, a missing or non-executable ExecStart binary. It only warns about most of these
    # and still exits 0, so any output at all fails the check. The unit's ExecStart names the
    # installed path (/usr/local/bin/lockwarden), absent here: a copy points it (and
    # ExecReload's) at the built binary instead. Without systemd as PID 1, nothing is started; the hardening options are
    # parsed, not exercised.
    m = re.search(r"^ExecStart=(\S+)", text, re.M)
    if not m:
        fail(where, "no ExecStart=")
        return
    copy_dir = os.path.join(tmp, "systemd")
    os.makedirs(copy_dir, exist_ok=True)
    copy = os.path.join(copy_dir, "lockwarden.service")
    with open(copy, "w") as f:
        text_here = text.replace(f"ExecStart={m.group(1)}", f"ExecStart={binary}", 1)
        f.write(text_here.replace(f"ExecReload={m.group(1)}", f"ExecReload={binary}", 1))
    r = run(["systemd-analyze", "verify", "--man=no", copy])
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or out:
        fail(where, f"systemd-analyze verify (rc {r.returncode}): {out}")

    # A floor under the hardening: systemd's own exposure score of the unit file (offline: the
    # options as written). 1.5 today; more than 2.0 means an option was dropped or weakened.
    # --threshold counts in tenths of the printed level.
    r = run(["systemd-analyze", "security", "--offline=true", "--threshold=20", copy])
    if r.returncode != 0:
        score = re.search(r"Overall exposure level for \S+: (\S+)", r.stdout)
        fail(where, "systemd-analyze security exposure "
             f"{score.group(1) if score else '?'} is above 2.0 (rc {r.returncode}) {r.stderr.strip()}")

    # The settings this deployment depends on (the agent's notify protocol, the hardening the
    # brief promises), read as systemd reads them.
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str
    try:
        parser.read_string(re.sub(r"^(\w+)=(.*)$", r"\1 = \2", text, flags=re.M))
        service = parser["Service"]
    except (configparser.Error, KeyError) as e:
        fail(where, f"cannot read [Service]: {e}")
        return
    for key, want in UNIT_REQUIRED.items():
        if key not in service:
            fail(where, f"{key}= missing (want {want!r})")
        elif service[key].strip() != want:
            fail(where, f"{key}={service[key].strip()} (want {want!r})")
    if "WatchdogSec" not in service:
        fail(where, "WatchdogSec= missing: the agent feeds a watchdog only when asked")
    if "@system-service" not in text:
        fail(where, "SystemCallFilter=@system-service missing")

    # The users of the unit come from the sysusers file: apply it to a scratch root.
    sysroot = os.path.join(tmp, "sysroot")
    os.makedirs(os.path.join(sysroot, "etc"), exist_ok=True)
    for name in ("passwd", "group", "shadow", "gshadow"):
        if os.path.exists(f"/etc/{name}"):
            shutil.copy(f"/etc/{name}", os.path.join(sysroot, "etc", name))
    r = run(["systemd-sysusers", f"--root={sysroot}", os.path.join(d, "lockwarden.sysusers")])
    if r.returncode != 0:
        fail("deploy/systemd/lockwarden.sysusers", f"systemd-sysusers: {r.stderr.strip()}")
    else:
        users = {l.split(":")[0] for l in open(os.path.join(sysroot, "etc/passwd"))}
        groups = {l.split(":")[0] for l in open(os.path.join(sysroot, "etc/group"))}
        if service.get("User", "").strip() not in users:
            fail(where, f"User={service.get('User')} is not created by lockwarden.sysusers")
        if service.get("Group", "").strip() not in groups:
            fail(where, f"Group={service.get('Group')} is not created by lockwarden.sysusers")

    # config.toml: accepted by the agent, and wired to the unit: the socket in the runtime
    # directory, the secrets from the unit's credentials.
    cfg_path = os.path.join(d, "config.toml")
    cfg_where = "deploy/systemd/config.toml"
    if not re.search(r"--config /etc/lockwarden/config.toml\b", text):
        fail(where, "ExecStart does not read /etc/lockwarden/config.toml")
    check_config(cfg_where, binary, cfg_path, secrets)
    cfg = open(cfg_path).read()
    socket_path = toml_value(cfg, "socket_path")
    runtime_dir = "/run/" + service.get("RuntimeDirectory", "").strip()
    if socket_path is None or os.path.dirname(socket_path) != runtime_dir:
        fail(cfg_where, f"socket_path {socket_path} is not in RuntimeDirectory ({runtime_dir})")
    credentials = set(re.findall(r"^LoadCredential=([^:\n]+):", text, re.M))
    for key in ("redis_password_file", "admin_token_file"):
        path = toml_value(cfg, key)
        if path is None:
            continue
        prefix = "/run/credentials/lockwarden.service/"
        if not path.startswith(prefix) or path[len(prefix):] not in credentials:
            fail(cfg_where, f"{key} {path} is not one of the unit's LoadCredential= "
                 f"({', '.join(sorted(credentials))} under {prefix})")


# --- Kubernetes ----------------------------------------------------------------------------

def load_yaml_docs(path, where):
    try:
        with open(path) as f:
            return [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        fail(where, f"YAML does not parse: {e}")
        return []


def containers_of(pod_spec):
    return list(pod_spec.get("initContainers") or []) + list(pod_spec.get("containers") or [])


def check_k8s(root, binary, tmp, secrets):
    d = os.path.join(root, "deploy/k8s")
    objects = []  # (file, object)
    files = sorted(f for f in os.listdir(d) if f.endswith((".yaml", ".yml")))
    kustomization = None
    for name in files:
        where = f"deploy/k8s/{name}"
        for doc in load_yaml_docs(os.path.join(d, name), where):
            if not isinstance(doc, dict):
                fail(where, f"a document is not a mapping: {doc!r:.60}")
                continue
            if doc.get("kind") == "Kustomization":
                kustomization = (where, doc)
                continue
            for field in ("apiVersion", "kind"):
                if not doc.get(field):
                    fail(where, f"an object has no {field}")
            meta = doc.get("metadata") or {}
            if not meta.get("name"):
                fail(where, f"a {doc.get('kind')} has no metadata.name")
            objects.append((where, doc))
    if kustomization:
        where, k = kustomization
        listed = set(k.get("resources") or [])
        for missing in sorted(set(files) - listed - {"kustomization.yaml"}):
            fail(where, f"{missing} is not listed in resources")
        for extra in sorted(listed - set(files)):
            fail(where, f"resource {extra} does not exist")

    def find(kind, name=None):
        return [(w, o) for w, o in objects
                if o.get("kind") == kind and (name is None or o["metadata"].get("name") == name)]

    namespaces = {o["metadata"].get("namespace") for _, o in objects if o.get("kind") != "Namespace"}
    declared = {o["metadata"]["name"] for _, o in find("Namespace")}
    if len(namespaces) != 1 or not namespaces <= declared:
        fail("deploy/k8s", f"objects are in namespaces {namespaces}, declared {declared}")

    # The config the sidecar reads: accepted by the agent.
    cms = find("ConfigMap", "lockwarden-config")
    if len(cms) != 1 or "config.toml" not in (cms[0][1].get("data") or {}):
        fail("deploy/k8s", "no ConfigMap lockwarden-config with a config.toml")
        return
    cm_where, cm = cms[0]
    cfg = cm["data"]["config.toml"]
    cfg_path = os.path.join(tmp, "k8s-config.toml")
    with open(cfg_path, "w") as f:
        f.write(cfg)
    check_config(cm_where + " (config.toml)", binary, cfg_path, secrets)

    secret_objs = find("Secret", "lockwarden-secrets")
    secret_keys = set()
    if len(secret_objs) != 1:
        fail("deploy/k8s", "no Secret lockwarden-secrets")
    else:
        s = secret_objs[0][1]
        secret_keys = set((s.get("stringData") or {}).keys()) | set((s.get("data") or {}).keys())

    # Redis: 5 independent masters, never replicas; quarantine and rollout in step.
    sts = find("StatefulSet", "redis")
    masters = re.findall(r'"redis://([^":/]+)', cfg)
    if len(sts) != 1:
        fail("deploy/k8s", "no StatefulSet redis")
    else:
        where, ss = sts[0]
        spec = ss["spec"]
        n = spec.get("replicas")
        ns = ss["metadata"].get("namespace")
        want = [f"{ss['metadata']['name']}-{i}.{spec.get('serviceName')}.{ns}.svc.cluster.local"
                for i in range(n or 0)]
        if n != 5 or masters != want:
            fail(cm_where, f"masters {masters} are not the {n} pods of StatefulSet redis {want}")
        if not find("Service", spec.get("serviceName")):
            fail(where, f"serviceName {spec.get('serviceName')} has no Service")
        svc = find("Service", spec.get("serviceName"))
        if svc and svc[0][1]["spec"].get("clusterIP") != "None":
            fail(svc[0][0], "the masters' Service must be headless (one address per master)")
        redis_text = yaml.safe_dump(spec["template"])
        if re.search(r"replicaof|slaveof|sentinel", redis_text, re.I):
            fail(where, "a master is configured as a replica or with Sentinel")
        max_ttl = toml_value(cfg, "max_ttl_ms")
        if max_ttl is not None and spec.get("minReadySeconds", 0) * 1000 < max_ttl:
            fail(where, f"minReadySeconds {spec.get('minReadySeconds')} s is shorter than "
                 f"max_ttl_ms {max_ttl}: a rollout would quarantine several masters at once")

    # The app and its sidecar.
    deps = find("Deployment")
    if len(deps) != 1:
        fail("deploy/k8s", f"expected one app Deployment, found {len(deps)}")
        return
    where, dep = deps[0]
    pod = dep["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    cs = containers_of(pod)
    agents = [c for c in cs if (c.get("args") or [])[:1] == ["serve"]]
    if len(agents) != 1:
        fail(where, "no lockwarden container (args: serve ...)")
        return
    agent = agents[0]
    apps = [c for c in cs if c is not agent]
    if agent.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
        fail(where, "the sidecar's readinessProbe is not GET /readyz")
    if agent.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz":
        fail(where, "the sidecar's livenessProbe is not GET /healthz")
    args = agent.get("args") or []
    mounts = {m["mountPath"]: m for m in agent.get("volumeMounts") or []}

    def volume_at(container, path):
        """The volume and the path inside it that `path` falls in, for a container."""
        for m in container.get("volumeMounts") or []:
            base = m["mountPath"].rstrip("/")
            if path == base or path.startswith(base + "/"):
                return volumes.get(m["name"]), path[len(base):].lstrip("/")
        return None, None

    if "--config" in args:
        vol, rel = volume_at(agent, args[args.index("--config") + 1])
        if not vol or (vol.get("configMap") or {}).get("name") != "lockwarden-config" or \
                rel != "config.toml":
            fail(where, "--config does not point at config.toml of ConfigMap lockwarden-config")
    else:
        fail(where, "the sidecar has no --config")
    for key in ("redis_password_file", "admin_token_file"):
        path = toml_value(cfg, key)
        if path is None:
            continue
        vol, rel = volume_at(agent, path)
        if not vol or (vol.get("secret") or {}).get("secretName") != "lockwarden-secrets" or \
                rel not in secret_keys:
            fail(cm_where, f"{key} {path} is not a key of Secret lockwarden-secrets mounted "
                 "in the sidecar")
    socket_dir = os.path.dirname(toml_value(cfg, "socket_path") or "")
    vol, _ = volume_at(agent, socket_dir + "/x")
    if not vol or "emptyDir" not in vol:
        fail(where, f"the socket directory {socket_dir} is not an emptyDir in the sidecar")
    for app in apps:
        vol2, _ = volume_at(app, socket_dir + "/x")
        if vol2 is not vol:
            fail(where, f"container {app['name']} does not share the socket's emptyDir")
    annotations = dep["spec"]["template"]["metadata"].get("annotations") or {}
    if annotations.get("prometheus.io/scrape") != "true":
        fail(where, "no prometheus.io/scrape annotation")

    # ServiceMonitor -> Service -> the Deployment's pods and the sidecar's admin port.
    for sm_where, sm in find("ServiceMonitor"):
        sel = sm["spec"]["selector"]["matchLabels"]
        svcs = [o for _, o in find("Service")
                if sel.items() <= (o["metadata"].get("labels") or {}).items()]
        if len(svcs) != 1:
            fail(sm_where, f"selects {len(svcs)} Services, expected 1")
            continue
        svc = svcs[0]
        pod_labels = dep["spec"]["template"]["metadata"]["labels"]
        if not svc["spec"]["selector"].items() <= pod_labels.items():
            fail(sm_where, "its Service does not select the app's pods")
        ports = {p["name"] for p in svc["spec"]["ports"]}
        for ep in sm["spec"]["endpoints"]:
            if ep.get("port") not in ports:
                fail(sm_where, f"endpoint port {ep.get('port')} is not a port of the Service")
        job = (svc["metadata"].get("labels") or {}).get(sm["spec"].get("jobLabel"))
        if job != "lockwarden":
            fail(sm_where, f"job label resolves to {job!r}, the alerts expect 'lockwarden'")


# --- Compose and Dockerfile ----------------------------------------------------------------

def dockerignore_allows(patterns, path):
    """Docker's rule: the last matching pattern wins; `!` re-includes. A directory pattern
    covers everything below it."""
    allowed = True
    for raw in patterns:
        neg = raw.startswith("!")
        pat = raw[1:] if neg else raw
        pat = pat.rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, pat.replace("**/", ""))
               for p in prefixes):
            allowed = neg
    return allowed


def check_dockerfile(root, context, dockerfile, binary, where):
    text = open(dockerfile).read()
    patterns = []
    ignore = dockerfile + ".dockerignore"
    if not os.path.exists(ignore):
        ignore = os.path.join(context, ".dockerignore")
    if os.path.exists(ignore):
        patterns = [l.strip() for l in open(ignore) if l.strip() and not l.startswith("#")]
    else:
        fail(where, "no .dockerignore for its build context")
    lines = re.sub(r"\\\n", " ", text).splitlines()
    stages = [l for l in lines if re.match(r"^FROM\s", l, re.I)]
    if len(stages) < 2:
        fail(where, "not a multi-stage build")
    for l in stages:
        if "bookworm" not in l:
            fail(where, f"stage not on Debian 12 bookworm: {l}")
    for l in lines:
        m = re.match(r"^COPY\s+(.*)$", l, re.I)
        if not m or "--from=" in m.group(1):
            continue
        srcs = [s for s in m.group(1).split() if not s.startswith("--")][:-1]
        for src in srcs:
            rel = src.rstrip("/").lstrip("./") or "."
            if not os.path.exists(os.path.join(context, rel)):
                fail(where, f"COPY {src}: no such file in the build context")
            elif not dockerignore_allows(patterns, rel):
                fail(where, f"COPY {src}: excluded by {os.path.basename(ignore)}")

    # The runtime stage installs the package of every library the binary needs directly
    # (readelf NEEDED, resolved by ldd, owned per dpkg -S on this Debian 12 machine). Their own
    # dependencies come with them; libc, libstdc++ and libgcc are in the base image.
    final = text[text.rfind("\nFROM "):]
    installed = set(re.findall(r"\b(lib[\w.+-]+)", final.split("rm -rf")[0]))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]).stdout)
    resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", run(["ldd", binary]).stdout, re.M))
    base = {"libc6", "libstdc++6", "libgcc-s1"}
    # One dpkg -S for all (each call reads the whole file list): the path as ldd gives it and
    # its target (merged /usr: either may be the one dpkg knows).
    candidates = {p for lib in needed if resolved.get(lib)
                  for p in (resolved[lib], os.path.realpath(resolved[lib]))}
    owners = {}
    for line in run(["dpkg", "-S", *sorted(candidates)]).stdout.splitlines():
        pkg, _, path = line.partition(": ")
        owners[path.strip()] = pkg.split(":")[0]
    for lib in needed:
        path = resolved.get(lib)
        owner = path and (owners.get(path) or owners.get(os.path.realpath(path)))
        if owner is None:
            fail(where, f"cannot tell which package provides {lib} ({path})")
        elif owner not in base and owner not in installed:
            fail(where, f"runtime stage does not install {owner} (provides {lib})")


def mount_source(compose_dir, volume, named):
    """Host path of a bind mount (None for a named volume)."""
    src = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
    if src in named:
        return None
    return os.path.normpath(os.path.join(compose_dir, src))


def check_compose(root, binary, tmp, secrets):
    d = os.path.join(root, "deploy/compose")
    where = "deploy/compose/compose.yaml"
    docs = load_yaml_docs(os.path.join(d, "compose.yaml"), where)
    if len(docs) != 1:
        return
    c = docs[0]
    services = c.get("services") or {}
    named = set((c.get("volumes") or {}).keys())
    secrets_decl = c.get("secrets") or {}
    want = [f"redis-{i}" for i in range(1, 6)] + ["agent-1", "agent-2", "prometheus", "grafana"]
    for s in want:
        if s not in services:
            fail(where, f"service {s} missing")
    for name, s in secrets_decl.items():
        if not os.path.exists(os.path.join(d, s.get("file", ""))):
            fail(where, f"secret {name}: file {s.get('file')} does not exist")
    container_paths = {}  # service -> {container path: host path}
    for name, svc in services.items():
        if not isinstance(svc, dict) or not svc.get("image") and not svc.get("build"):
            fail(where, f"service {name} has neither image nor build")
            continue
        mapping = container_paths.setdefault(name, {})
        for v in svc.get("volumes") or []:
            host = mount_source(d, v, named)
            target = v.split(":")[1] if isinstance(v, str) else v.get("target")
            if host is None:
                continue
            if not os.path.exists(host):
                fail(where, f"service {name} mounts {v}: {os.path.relpath(host, root)} does not exist")
            mapping[target] = host
        for sname in svc.get("secrets") or []:
            if sname not in secrets_decl:
                fail(where, f"service {name} uses undeclared secret {sname}")
            else:
                mapping[f"/run/secrets/{sname}"] = os.path.join(d, secrets_decl[sname]["file"])
        for dep in svc.get("depends_on") or []:
            if dep not in services:
                fail(where, f"service {name} depends on unknown service {dep}")
        b = svc.get("build")
        if b:
            ctx = os.path.normpath(os.path.join(d, b.get("context", ".")))
            df = os.path.join(ctx, b.get("dockerfile", "Dockerfile"))
            if not os.path.isdir(ctx) or not os.path.exists(df):
                fail(where, f"service {name}: build context {ctx} or {df} does not exist")
            elif name == "agent-1":
                check_dockerfile(root, ctx, df, binary, os.path.relpath(df, root))
        if name.startswith("redis") and re.search(r"replicaof|slaveof",
                                                  " ".join(map(str, svc.get("command") or [])), re.I):
            fail(where, f"{name} is a replica: the masters must be independent")

    # The agents' config, as the agents read it.
    for name in ("agent-1", "agent-2"):
        svc = services.get(name) or {}
        cmd = " ".join(map(str, svc.get("command") or []))
        m = re.search(r"--config\s+(\S+)", cmd)
        host = m and container_paths.get(name, {}).get(m.group(1))
        if not host:
            fail(where, f"{name}: its --config is not a mounted file")
            continue
        check_config(os.path.relpath(host, root), binary, host, secrets,
                     token_flag="--admin-token-file" in cmd)

    # Prometheus: its config with container paths replaced by the files compose mounts there,
    # checked by promtool (which also loads and checks the rule files).
    mapping = container_paths.get("prometheus", {})
    cfg_host = mapping.get("/etc/prometheus/prometheus.yml")
    if not cfg_host:
        fail(where, "prometheus does not mount a prometheus.yml")
    else:
        text = open(cfg_host).read()
        for target, host in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(target, host)
        rewritten = os.path.join(tmp, "prometheus.yml")
        with open(rewritten, "w") as f:
            f.write(text)
        r = run(["promtool", "check", "config", rewritten])
        if r.returncode != 0:
            fail(os.path.relpath(cfg_host, root),
                 f"promtool check config (paths as mounted): {(r.stdout + r.stderr).strip()}")
        prom = yaml.safe_load(open(cfg_host))
        jobs = {j.get("job_name"): j for j in prom.get("scrape_configs") or []}
        if "lockwarden" not in jobs:
            fail(os.path.relpath(cfg_host, root), "no scrape job named lockwarden")
        else:
            targets = [t for sc in jobs["lockwarden"].get("static_configs") or []
                       for t in sc.get("targets") or []]
            for t in targets:
                if t.split(":")[0] not in services:
                    fail(os.path.relpath(cfg_host, root), f"target {t} is not a compose service")

    # Grafana: the provisioned dashboard directory holds dashboards/lockwarden.json.
    mapping = container_paths.get("grafana", {})
    prov = mapping.get("/etc/grafana/provisioning")
    if not prov:
        fail(where, "grafana does not mount a provisioning directory")
        return
    for sub in ("datasources", "dashboards"):
        files = [f for f in os.listdir(os.path.join(prov, sub)) if f.endswith((".yaml", ".yml"))] \
            if os.path.isdir(os.path.join(prov, sub)) else []
        if not files:
            fail(where, f"no Grafana {sub} provisioning file")
        for f in files:
            docs = load_yaml_docs(os.path.join(prov, sub, f), f"{os.path.relpath(prov, root)}/{sub}/{f}")
            if sub == "dashboards":
                for p in (docs[0] if docs else {}).get("providers") or []:
                    path = (p.get("options") or {}).get("path", "")
                    host = mapping.get(path)
                    if not host or not os.path.exists(os.path.join(host, "lockwarden.json")):
                        fail(where, f"dashboard provider path {path} is not a mount holding "
                             "lockwarden.json")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    root, binary = os.path.abspath(a.root), os.path.abspath(a.bin)
    with tempfile.TemporaryDirectory(prefix="lw-deploy-check-") as tmp:
        secrets = Secrets(tmp)
        for name, check in (("systemd", check_systemd), ("k8s", check_k8s),
                            ("compose", check_compose)):
            before = len(problems)
            try:
                check(root, binary, tmp, secrets)
            except Exception as e:  # a malformed file must fail the check, not crash past it
                fail(f"deploy/{name}", f"check crashed: {type(e).__name__}: {e}")
            print(f"deploy check: {name}: {'ok' if len(problems) == before else 'FAIL'}")
    for p in problems:
        print(f"  {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
