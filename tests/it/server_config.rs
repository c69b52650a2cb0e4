//! The shipped configurations load: `config/helixor.yaml` documents every
//! key the server reads, and the `helixor.yaml` of each Kubernetes ConfigMap
//! under `deploy/` is a valid configuration.

use helixor::server::config::{self, ServeOptions};
use helixor::server::LogFormat;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn load(path: &Path) -> config::Config {
    config::load(
        &ServeOptions {
            config: Some(path.to_path_buf()),
            ..ServeOptions::default()
        },
        &no_env,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_documented_example_sets_and_comments_every_key() {
    let path = root().join("config/helixor.yaml");
    let c = load(&path);
    assert_eq!(c.packs_dir, root().join("config/demo/packs"));
    assert_eq!(c.license, Some(root().join("config/demo/license.hxlic")));
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    for key in config::keys() {
        let mut v = &doc;
        for part in key.split('.') {
            v = v
                .get(part)
                .unwrap_or_else(|| panic!("config/helixor.yaml lacks `{key}`"));
        }
        let leaf = key.rsplit('.').next().unwrap();
        assert!(
            text.contains(&format!("{leaf}:")),
            "config/helixor.yaml does not show `{key}`"
        );
    }
}

#[test]
fn the_kubernetes_configmaps_hold_valid_configurations() {
    for rel in [
        "deploy/configmap-config.yaml",
        "deploy/sidecar/configmap-config.yaml",
    ] {
        let path = root().join(rel);
        if !path.exists() {
            continue;
        }
        let manifest: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let text = manifest["data"]["helixor.yaml"]
            .as_str()
            .unwrap_or_else(|| panic!("{rel}: no data.helixor.yaml"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("helixor.yaml");
        std::fs::write(&file, text).unwrap();
        let c = load(&file);
        assert_eq!(c.listen.port(), 8080, "{rel}");
        assert!(c.packs_dir.is_absolute(), "{rel}");
        assert_eq!(c.log.format, LogFormat::Json, "{rel}");
    }
}
