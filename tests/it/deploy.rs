//! The Dockerfile and the Kubernetes manifests use the paths, ports, probe
//! routes and configuration the binary actually serves and reads (issue 4).
//! Everything is parsed from the files; the binary's side comes from
//! `helixor::server` (its routes and its configuration loader).

use helixor::server::config::{self, ServeOptions};
use helixor::server::routes::ROUTES;
use serde_yaml::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(rel: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(root().join(rel)).unwrap()).unwrap()
}

fn served(method: &str, path: &str) -> bool {
    ROUTES.iter().any(|r| r.method == method && r.path == path)
}

/// `http://127.0.0.1:8080/healthz` → (8080, "/healthz").
fn url_parts(url: &str) -> (u16, String) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http URL: {url}"));
    let (host_port, path) = rest.split_once('/').unwrap();
    let port = host_port.rsplit_once(':').unwrap().1.parse().unwrap();
    (port, format!("/{path}"))
}

/// The `serve --config PATH` argument of a container's args.
fn config_arg(args: &[String]) -> String {
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    let i = args.iter().position(|a| a == "--config").expect("--config");
    args[i + 1].clone()
}

/// Loads a ConfigMap's `helixor.yaml` with the binary's own loader.
fn configmap_config(rel: &str) -> config::Config {
    let cm = yaml(rel);
    let text = cm["data"]["helixor.yaml"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("helixor.yaml");
    std::fs::write(&file, text).unwrap();
    config::load(
        &ServeOptions {
            config: Some(file),
            ..ServeOptions::default()
        },
        &|_: &str| None,
    )
    .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

struct Dockerfile {
    expose: u16,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    healthcheck: Vec<String>,
}

fn dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    // Join continuation lines, then read the instructions of the final stage.
    let joined = text.replace("\\\n", " ");
    let last_stage = joined.rsplit("\nFROM ").next().unwrap();
    let json_after = |instr: &str| -> Vec<String> {
        let line = last_stage
            .lines()
            .find(|l| l.trim_start().starts_with(instr))
            .unwrap();
        let start = line.find('[').unwrap();
        serde_json::from_str(&line[start..]).unwrap()
    };
    let expose = last_stage
        .lines()
        .find_map(|l| l.trim().strip_prefix("EXPOSE "))
        .map(|p| p.trim().parse().unwrap())
        .unwrap();
    Dockerfile {
        expose,
        entrypoint: json_after("ENTRYPOINT"),
        cmd: json_after("CMD ["),
        healthcheck: json_after("HEALTHCHECK"),
    }
}

#[test]
fn dockerfile_runs_the_binary_on_the_port_and_routes_it_serves() {
    let d = dockerfile();
    let bin = Path::new(env!("CARGO_BIN_EXE_helixor-pack"))
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(d.entrypoint, vec![bin.clone()]);
    assert_eq!(config_arg(&d.cmd), "/etc/helixor/helixor.yaml");
    assert_eq!(
        d.healthcheck[..3],
        [bin, "healthcheck".to_string(), "--url".to_string()]
    );
    let (port, path) = url_parts(&d.healthcheck[3]);
    assert_eq!(port, d.expose);
    assert!(
        served("GET", &path),
        "HEALTHCHECK probes {path}, which is not served"
    );
    // The image's command and the cluster configuration agree on the port.
    let cfg = configmap_config("deploy/configmap-config.yaml");
    assert_eq!(cfg.listen.port(), d.expose);
    assert!(
        cfg.listen.ip().is_unspecified(),
        "a container must listen on 0.0.0.0"
    );
}

/// The helixor container of a pod spec (a container or a native sidecar).
fn helixor_container(pod: &Value) -> Value {
    let all: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod[*k].as_sequence())
        .flatten()
        .collect();
    all.into_iter()
        .find(|c| {
            c["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("helixor-pack"))
        })
        .cloned()
        .expect("a helixor-pack container")
}

fn check_probe(probe: &Value, listen_port: u16, named_ports: &[(String, u16)], what: &str) {
    if let Some(get) = probe.get("httpGet") {
        let path = get["path"].as_str().unwrap();
        assert!(
            served("GET", path),
            "{what} probes {path}, which is not served"
        );
        let port = match &get["port"] {
            Value::String(name) => named_ports
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| *p)
                .unwrap(),
            v => v.as_u64().unwrap() as u16,
        };
        assert_eq!(port, listen_port, "{what} probes another port");
    } else {
        let cmd = strs(&probe["exec"]["command"]);
        assert_eq!(
            cmd[1..3],
            ["healthcheck".to_string(), "--url".to_string()],
            "{what}: {cmd:?}"
        );
        let (port, path) = url_parts(&cmd[3]);
        assert!(
            served("GET", &path),
            "{what} probes {path}, which is not served"
        );
        assert_eq!(port, listen_port, "{what} probes another port");
    }
}

/// The mount path of the volume named `volume` in the container.
fn mount_of(container: &Value, volume: &str) -> String {
    container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume)
        .map(|m| m["mountPath"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("volume {volume} is not mounted"))
}

fn check_deployment(deployment: &str, configmap: &str) {
    let dep = yaml(deployment);
    let pod = &dep["spec"]["template"]["spec"];
    let c = helixor_container(pod);
    let cfg = configmap_config(configmap);
    let port = cfg.listen.port();
    let named: Vec<(String, u16)> = c["ports"]
        .as_sequence()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    (
                        p["name"].as_str().unwrap().to_string(),
                        p["containerPort"].as_u64().unwrap() as u16,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if !named.is_empty() {
        assert!(
            named.iter().any(|(_, p)| *p == port),
            "{deployment}: containerPort differs from listen {port}"
        );
    }
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        check_probe(&c[probe], port, &named, &format!("{deployment} {probe}"));
    }
    assert_eq!(
        strs(&c["args"]),
        dockerfile().cmd,
        "{deployment}: args differ from the image's CMD"
    );

    // The config file is the ConfigMap's helixor.yaml, mounted where --config points.
    let config_path = PathBuf::from(config_arg(&strs(&c["args"])));
    let volumes = pod["volumes"].as_sequence().unwrap();
    let cm_name = yaml(configmap)["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let cm_volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"].as_str() == Some(&cm_name))
        .unwrap();
    let cm_mount = mount_of(&c, cm_volume["name"].as_str().unwrap());
    assert_eq!(config_path, Path::new(&cm_mount).join("helixor.yaml"));

    // License and packs: one projected volume, items where the config looks.
    let license = cfg.license.clone().unwrap();
    let projected = volumes
        .iter()
        .find(|v| v.get("projected").is_some())
        .unwrap();
    let mount = PathBuf::from(mount_of(&c, projected["name"].as_str().unwrap()));
    let lic_rel = license
        .strip_prefix(&mount)
        .unwrap_or_else(|_| panic!("license {license:?} is outside {mount:?}"));
    let packs_rel = cfg
        .packs_dir
        .strip_prefix(&mount)
        .unwrap_or_else(|_| panic!("packs_dir outside {mount:?}"));
    let items: Vec<String> = projected["projected"]["sources"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["secret"]["items"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .map(|i| i["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        items.contains(&lic_rel.display().to_string()),
        "{deployment}: no license item at {lic_rel:?}"
    );
    let packs: Vec<&String> = items
        .iter()
        .filter(|p| Path::new(p).parent() == Some(packs_rel))
        .collect();
    assert!(
        !packs.is_empty(),
        "{deployment}: no pack items in {packs_rel:?}"
    );
    let (pack_items, sig_items): (Vec<&String>, Vec<&String>) =
        packs.iter().partition(|p| p.ends_with(".hxpack"));
    assert!(
        sig_items.iter().all(|p| p.ends_with(".hxpack.sig")),
        "{deployment}: the server reads only *.hxpack and their *.hxpack.sig"
    );
    // With signers every pack needs its signature in the same volume
    // ([§17](docs/guides/signing.md#s17)): swapped together, never one without the other.
    if cfg.pack_signers.is_some() {
        for p in &pack_items {
            assert!(
                sig_items.contains(&&format!("{p}.sig")),
                "{deployment}: {p} has no signature item"
            );
        }
        let signers_volume = volumes
            .iter()
            .find(|v| v["configMap"]["name"] == "helixor-pack-signers")
            .unwrap_or_else(|| panic!("{deployment}: no helixor-pack-signers volume"));
        assert_eq!(
            cfg.pack_signers.clone().unwrap(),
            PathBuf::from(mount_of(&c, signers_volume["name"].as_str().unwrap()))
        );
        assert!(cfg.require_pack_signatures, "{deployment}");
    }

    // Issuer keys: the ConfigMap of *.pub files, mounted where the config looks.
    let keys_volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"] == "helixor-issuer-keys")
        .unwrap();
    assert_eq!(
        cfg.issuer_keys.clone().unwrap(),
        PathBuf::from(mount_of(&c, keys_volume["name"].as_str().unwrap()))
    );

    // Shutdown: preStop + drain + grace fit in the termination grace period.
    let grace_s = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    let pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        pre_stop * 1000 + cfg.shutdown.drain_delay_ms + cfg.shutdown.grace_ms <= grace_s * 1000,
        "{deployment}: shutdown does not fit"
    );
}

#[test]
fn deployment_probes_mounts_and_config_match_the_binary() {
    check_deployment("deploy/deployment.yaml", "deploy/configmap-config.yaml");
    let dep = yaml("deploy/deployment.yaml");
    let ann = &dep["spec"]["template"]["metadata"]["annotations"];
    assert!(served("GET", ann["prometheus.io/path"].as_str().unwrap()));
    let port: u16 = ann["prometheus.io/port"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        port,
        configmap_config("deploy/configmap-config.yaml")
            .listen
            .port()
    );
    // The Service sends to the container's named port.
    let svc = yaml("deploy/service.yaml");
    let target = svc["spec"]["ports"][0]["targetPort"].as_str().unwrap();
    let c = helixor_container(&dep["spec"]["template"]["spec"]);
    assert!(c["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|p| p["name"] == target));
}

#[test]
fn sidecar_gateway_calls_the_served_evaluate_route_on_loopback() {
    check_deployment(
        "deploy/sidecar/base/deployment.yaml",
        "deploy/sidecar/base/configmap-config.yaml",
    );
    let cfg = configmap_config("deploy/sidecar/base/configmap-config.yaml");
    assert!(
        cfg.listen.ip().is_loopback(),
        "the sidecar listens on loopback only"
    );
    let dep = yaml("deploy/sidecar/base/deployment.yaml");
    let gateway = dep["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "gateway")
        .unwrap()
        .clone();
    let url = gateway["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "HELIXOR_URL")
        .unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string();
    let (port, path) = url_parts(&url);
    assert!(url.starts_with("http://127.0.0.1:"));
    assert_eq!(port, cfg.listen.port());
    assert!(
        served("POST", &path),
        "the gateway calls {path}, which is not served"
    );
}

#[test]
fn litellm_sidecar_guardrail_points_at_the_sidecar_and_a_mounted_pack() {
    let cfg = configmap_config("deploy/sidecar/base/configmap-config.yaml");
    let cm = yaml("deploy/sidecar/litellm/configmap-litellm.yaml");
    let litellm: Value = serde_yaml::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
    let guardrails = litellm["guardrails"].as_sequence().unwrap();
    assert_eq!(guardrails.len(), 1);
    let p = &guardrails[0]["litellm_params"];
    assert_eq!(p["guardrail"], "generic_guardrail_api");
    assert_eq!(strs(&p["mode"]), ["pre_call", "post_call"]);
    assert_eq!(p["streaming_transform_mode"], "incremental_diff");
    assert_eq!(p["unreachable_fallback"], "fail_closed");
    assert_eq!(p["default_on"], true);
    // LiteLLM appends the route to api_base.
    let base = p["api_base"].as_str().unwrap();
    assert_eq!(base, format!("http://{}", cfg.listen));
    assert!(served("POST", "/beta/litellm_basic_guardrail_api"));
    // The pack it names is one the pod mounts.
    let pack = p["additional_provider_specific_params"]["pack_id"]
        .as_str()
        .unwrap();
    let dep = yaml("deploy/sidecar/base/deployment.yaml");
    let mounted = serde_yaml::to_string(&dep["spec"]["template"]["spec"]["volumes"]).unwrap();
    assert!(mounted.contains(&format!("packs/{pack}.hxpack")), "{pack}");
    // The patch turns the gateway container into the proxy, reading that file.
    let patch = yaml("deploy/sidecar/litellm/deployment-patch.yaml");
    let gateway = &patch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(gateway["name"], "gateway");
    let args = strs(&gateway["args"]);
    assert_eq!(args[..2], ["--config", "/etc/litellm/config.yaml"]);
    assert_eq!(gateway["volumeMounts"][0]["mountPath"], "/etc/litellm");
}
