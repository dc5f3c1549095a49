//! The Kubernetes manifests (`packaging/kubernetes/`) checked offline:
//! rendered with `kubectl kustomize`, validated against the Kubernetes API
//! schemas (`kubernetes-validate`, PyPI, which bundles them; strict: unknown
//! fields fail) for the oldest and newest Kubernetes it knows, the
//! PodMonitor against the Prometheus Operator CRD's schema (vendored under
//! `tests/vendor/prometheus-operator/`), the plain Prometheus scrape
//! example with `promtool check config`, the ConfigMap's TOML with
//! `mongoload check-config`, and the pieces against each other (ports,
//! paths, labels, the grace period, the image's user, the version).
//!
//! Tools: `kubectl` (its built-in kustomize), `kubernetes-validate` and
//! `python3` with PyYAML (pip: kubernetes-validate brings it; it reads the
//! YAML for these checks), `promtool`. A missing tool fails the test when
//! `CI` is set and prints a loud SKIPPED otherwise.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::prometheus_tools::{repo, require_tool, PROMETHEUS, PROMTOOL};
use mongoload::config::{self, Config};
use serde_json::{json, Value};

/// The oldest Kubernetes the manifests are checked against (Pod Security
/// Admission, used by namespace.yaml, is GA since 1.25). The newest is
/// kubernetes-validate's default, the latest it bundles.
const OLDEST_KUBERNETES: &str = "1.25.0";

/// The namespace kustomization.yaml puts everything in.
const NAMESPACE: &str = "mongoload";

fn k8s_dir() -> PathBuf {
    repo().join("packaging/kubernetes")
}

// ---------------------------------------------------------------- tools

/// An executable on PATH, or `None` after the CI-fails / SKIPPED notice.
fn require_on_path(name: &str, install: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if found.is_some() {
        return found;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{name} is missing and CI is set: {install}");
    }
    eprintln!(
        "\n!!!!!!!! SKIPPED: {name} is not on PATH; this test did not run.\n!!!!!!!! {install}\n"
    );
    None
}

/// All the tools the manifest checks need: kubectl, kubernetes-validate,
/// python3 with PyYAML. `None` (test skipped) when one is missing outside CI.
fn tools() -> Option<()> {
    require_on_path(
        "kubectl",
        "install kubectl (Debian: apt-get install kubernetes-client)",
    )?;
    require_on_path("kubernetes-validate", "pip install kubernetes-validate")?;
    let python = require_on_path("python3", "apt-get install python3")?;
    let has_yaml = Command::new(python)
        .args(["-c", "import yaml"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_yaml {
        if std::env::var_os("CI").is_some() {
            panic!("python3 cannot import yaml and CI is set: pip install kubernetes-validate (brings PyYAML)");
        }
        eprintln!("\n!!!!!!!! SKIPPED: python3 has no PyYAML; pip install kubernetes-validate\n");
        return None;
    }
    Some(())
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every document of a YAML file (PyYAML, as JSON values), empty ones left out.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let out = run(Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sys, yaml\n\
         docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]\n\
         json.dump(docs, sys.stdout)",
        )
        .arg(path));
    assert!(
        out.status.success(),
        "{} is not valid YAML: {}",
        path.display(),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

/// The one document of a YAML file.
fn yaml_doc(path: &Path) -> Value {
    let mut docs = yaml_docs(path);
    assert_eq!(docs.len(), 1, "{} should hold one document", path.display());
    docs.remove(0)
}

/// `kubectl kustomize packaging/kubernetes`: the objects `kubectl apply -k`
/// would send, as YAML text and parsed. Rendered once per test binary.
fn rendered() -> &'static (String, Vec<Value>) {
    static RENDERED: OnceLock<(String, Vec<Value>)> = OnceLock::new();
    RENDERED.get_or_init(|| {
        let out = run(Command::new("kubectl").arg("kustomize").arg(k8s_dir()));
        assert!(
            out.status.success(),
            "kubectl kustomize packaging/kubernetes failed: {}",
            text(&out.stderr)
        );
        let yaml = text(&out.stdout);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rendered.yaml");
        std::fs::write(&file, &yaml).unwrap();
        (yaml, yaml_docs(&file))
    })
}

/// The rendered object of a kind (exactly one is expected).
fn object(kind: &str) -> &'static Value {
    let found: Vec<&Value> = rendered().1.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "want one {kind} in the kustomization");
    found[0]
}

/// Runs kubernetes-validate (strict) on a file for one Kubernetes version
/// (`None`: its latest) and returns (success, stdout + stderr).
fn kubernetes_validate(file: &Path, version: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new("kubernetes-validate");
    cmd.arg("--strict");
    if let Some(v) = version {
        cmd.args(["-k", v]);
    }
    let out = run(cmd.arg(file));
    (
        out.status.success(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

fn write_json(path: &Path, docs: &[Value]) {
    // JSON is YAML: every tool here reads it.
    let body: Vec<String> = docs.iter().map(|d| d.to_string()).collect();
    std::fs::write(path, body.join("\n---\n")).unwrap();
}

fn the_container() -> &'static Value {
    let containers = object("StatefulSet")["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container per member");
    &containers[0]
}

fn env_of(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let value = e["value"]
                .as_str()
                .unwrap_or_else(|| panic!("env {} must be a literal value", e["name"]));
            (e["name"].as_str().unwrap().to_owned(), value.to_owned())
        })
        .collect()
}

/// The TOML the ConfigMap holds: its text, and parsed by mongoload's own
/// config loader (no environment).
fn configmap_toml() -> (String, Config) {
    let cm = object("ConfigMap");
    let text = cm["data"]["mongoload.toml"]
        .as_str()
        .expect("the ConfigMap has data.mongoload.toml")
        .to_owned();
    let cfg = config::parse_with_env(&text, Path::new("configmap.yaml"), std::iter::empty())
        .unwrap_or_else(|e| panic!("the ConfigMap's mongoload.toml: {e}"));
    (text, cfg)
}

// ---------------------------------------------------------------- tests

#[test]
fn kustomization_renders_every_manifest_and_passes_the_api_schemas() {
    let Some(()) = tools() else { return };
    let (yaml, docs) = rendered();

    let kinds: BTreeSet<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    let want: BTreeSet<&str> = [
        "ConfigMap",
        "Namespace",
        "PodDisruptionBudget",
        "PodMonitor",
        "Service",
        "StatefulSet",
    ]
    .into();
    assert_eq!(kinds, want, "the kustomization's objects");
    for d in docs.iter().filter(|d| d["kind"] != "Namespace") {
        assert_eq!(
            d["metadata"]["namespace"], NAMESPACE,
            "{} {} is not in the namespace {NAMESPACE}",
            d["kind"], d["metadata"]["name"]
        );
    }
    // Every manifest of the directory is in the kustomization, except the
    // examples kept out on purpose (the Secret: applying it would overwrite
    // the real one).
    let kustomization = yaml_doc(&k8s_dir().join("kustomization.yaml"));
    let listed: BTreeSet<&str> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    for entry in std::fs::read_dir(k8s_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml")
            && name != "kustomization.yaml"
            && !name.ends_with(".example.yaml")
        {
            assert!(
                listed.contains(name.as_str()),
                "{name} is not in kustomization.yaml"
            );
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, yaml).unwrap();
    let secret = k8s_dir().join("secret.example.yaml");
    for version in [Some(OLDEST_KUBERNETES), None] {
        for f in [&file, &secret] {
            let (ok, out) = kubernetes_validate(f, version);
            assert!(
                ok,
                "kubernetes-validate {} ({version:?}):\n{out}",
                f.display()
            );
            // The PodMonitor is no built-in kind: the next test checks it.
            for line in out.lines().filter(|l| !l.starts_with("INFO")) {
                assert!(
                    line.starts_with("WARN") && line.contains("kind PodMonitor"),
                    "kubernetes-validate {} ({version:?}): {line}",
                    f.display()
                );
            }
        }
    }

    // The validator rejects what the API server would: a misspelt field.
    let mut broken = object("StatefulSet").clone();
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] =
        json!(true);
    let bad = dir.path().join("broken.yaml");
    write_json(&bad, &[broken]);
    let (ok, out) = kubernetes_validate(&bad, None);
    assert!(
        !ok && out.contains("readOnlyRootFs"),
        "a misspelt field passed:\n{out}"
    );
}

/// Makes a CRD's structural schema reject unknown fields, as the API
/// server's strict field validation (kubectl's default) does: every object
/// schema with `properties` and no `additionalProperties` or
/// `x-kubernetes-preserve-unknown-fields` gets `additionalProperties: false`.
fn strict(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties")
                && !map.contains_key("additionalProperties")
                && !map.contains_key("x-kubernetes-preserve-unknown-fields")
            {
                map.insert("additionalProperties".into(), json!(false));
            }
            map.values_mut().for_each(strict);
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

#[test]
fn podmonitor_passes_the_prometheus_operator_crd_schema() {
    let Some(()) = tools() else { return };
    let crd = yaml_doc(
        &repo().join("tests/vendor/prometheus-operator/monitoring.coreos.com_podmonitors.yaml"),
    );
    let monitor = object("PodMonitor");
    let group = crd["spec"]["group"].as_str().unwrap();
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| format!("{group}/{}", v["name"].as_str().unwrap()) == monitor["apiVersion"])
        .unwrap_or_else(|| panic!("the CRD serves no {}", monitor["apiVersion"]));
    assert_eq!(version["served"], true);
    assert_eq!(crd["spec"]["names"]["kind"], monitor["kind"]);
    assert_eq!(crd["spec"]["scope"], "Namespaced");

    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    strict(&mut schema);
    // OpenAPI v3 schemas are JSON Schema draft 4 with extensions (x-kubernetes-*),
    // which a validator ignores.
    let validator = jsonschema::draft4::new(&schema).expect("the CRD's schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(monitor)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "podmonitor.yaml against the CRD:\n{}",
        errors.join("\n")
    );

    // The schema does catch mistakes: an unknown field, a malformed duration.
    let mut typo = monitor.clone();
    typo["spec"]["podMetricsEndpoint"] = typo["spec"]["podMetricsEndpoints"].clone();
    assert!(!validator.is_valid(&typo), "an unknown field passed");
    let mut bad_interval = monitor.clone();
    bad_interval["spec"]["podMetricsEndpoints"][0]["interval"] = json!("15 seconds");
    assert!(
        !validator.is_valid(&bad_interval),
        "a malformed interval passed"
    );
}

/// The keys of Prometheus' `kubernetes_sd_config` (v3.14,
/// discovery/kubernetes/kubernetes.go: `SDConfig`, `NamespaceDiscovery`,
/// `SelectorConfig`, `AttachMetadataConfig`; the HTTP client keys of
/// common/config.HTTPClientConfig are inlined), with the rules its
/// `UnmarshalYAML` enforces that a schema can say: a role is required, and
/// a pod role takes pod and node selectors only. Debian's Prometheus is
/// built without Kubernetes discovery, so its promtool cannot check this
/// block.
fn kubernetes_sd_schema() -> Value {
    let role =
        json!({ "enum": ["pod", "service", "endpoints", "endpointslice", "node", "ingress"] });
    json!({
        "type": "object",
        "required": ["role"],
        "additionalProperties": false,
        "properties": {
            "api_server": { "type": "string" },
            "role": role,
            "kubeconfig_file": { "type": "string" },
            "namespaces": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "own_namespace": { "type": "boolean" },
                    "names": { "type": "array", "items": { "type": "string", "minLength": 1 } }
                }
            },
            "selectors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["role"],
                    "properties": {
                        "role": role,
                        "label": { "type": "string" },
                        "field": { "type": "string" }
                    }
                }
            },
            "attach_metadata": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "node": { "type": "boolean" }, "namespace": { "type": "boolean" },
                    "deployment": { "type": "boolean" }, "job": { "type": "boolean" },
                    "cronjob": { "type": "boolean" }
                }
            },
            "basic_auth": { "type": "object" }, "authorization": { "type": "object" },
            "oauth2": { "type": "object" }, "bearer_token": { "type": "string" },
            "bearer_token_file": { "type": "string" }, "tls_config": { "type": "object" },
            "proxy_url": { "type": "string" }, "no_proxy": { "type": "string" },
            "proxy_from_environment": { "type": "boolean" },
            "proxy_connect_header": { "type": "object" },
            "follow_redirects": { "type": "boolean" }, "enable_http2": { "type": "boolean" },
            "http_headers": { "type": "object" }
        },
        "if": { "properties": { "role": { "const": "pod" } } },
        "then": { "properties": { "selectors": { "items": { "properties": { "role": { "enum": ["pod", "node"] } } } } } }
    })
}

#[test]
fn scrape_example_passes_promtool() {
    let Some(()) = tools() else { return };
    let Some(promtool) = require_tool(PROMTOOL) else {
        return;
    };
    let example = k8s_dir().join("prometheus-scrape.yml");
    let config = yaml_doc(&example);
    let jobs = config["scrape_configs"].as_array().expect("scrape_configs");
    let job = jobs
        .iter()
        .find(|j| j["job_name"] == "mongoload")
        .expect("a job named mongoload: the alert rules name it");

    let schema = kubernetes_sd_schema();
    let sd_validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let sds = job["kubernetes_sd_configs"]
        .as_array()
        .expect("kubernetes_sd_configs");
    for sd in sds {
        let errors: Vec<String> = sd_validator
            .iter_errors(sd)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "kubernetes_sd_configs: {}",
            errors.join("; ")
        );
        assert_eq!(sd["role"], "pod");
        assert_eq!(sd["namespaces"]["names"], json!([NAMESPACE]));
    }
    let mut wrong = sds[0].clone();
    wrong["selectors"][0]["role"] = json!("service");
    assert!(
        !sd_validator.is_valid(&wrong),
        "a service selector on the pod role passed"
    );

    // promtool checks everything else (globals, the relabel rules, the
    // rule file) with the discovery swapped for a static target.
    let mut checked = config.clone();
    for j in checked["scrape_configs"].as_array_mut().unwrap() {
        if let Some(obj) = j.as_object_mut() {
            if obj.remove("kubernetes_sd_configs").is_some() {
                obj.insert(
                    "static_configs".into(),
                    json!([{ "targets": ["mongoload-0.mongoload.mongoload.svc:9480"] }]),
                );
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prometheus.yml");
    write_json(&file, &[checked]);
    for rules in config["rule_files"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let name = rules.as_str().unwrap();
        std::fs::copy(
            repo().join("etc/prometheus").join(name),
            dir.path().join(name),
        )
        .unwrap_or_else(|e| panic!("rule file {name} is not in etc/prometheus: {e}"));
    }
    let out = run(Command::new(promtool).args(["check", "config"]).arg(&file));
    assert!(
        out.status.success(),
        "promtool check config (prometheus-scrape.yml):\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Runs `mongoload check-config` on a file with only the given MONGOLOAD_
/// variables set.
fn check_config(file: &Path, env: &[(String, String)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongoload"));
    cmd.arg("check-config").arg("--config").arg(file);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MONGOLOAD_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    run(&mut cmd)
}

#[test]
fn configmap_toml_passes_check_config() {
    let Some(()) = tools() else { return };
    let (toml_text, _) = configmap_toml();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mongoload.toml");
    std::fs::write(&file, &toml_text).unwrap();

    let out = check_config(&file, &[]);
    assert!(
        out.status.success(),
        "check-config on the ConfigMap's TOML:\n{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("(from uri_file /run/secrets/mongoload/uri)"));
    // A repeating plan at 30,000 ops/s: its data keeps to a bound.
    assert!(
        text(&out.stdout).contains("bounded by max_docs"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !text(&out.stderr).contains("no bound"),
        "{}",
        text(&out.stderr)
    );

    // With the Secret example's connection string in place of the file:
    // a valid URI, its password never printed.
    let secret = yaml_doc(&k8s_dir().join("secret.example.yaml"));
    let uri = secret["stringData"]["uri"]
        .as_str()
        .expect("stringData.uri");
    let with_uri = toml_text.replace(
        "uri_file = \"/run/secrets/mongoload/uri\"",
        &format!("uri = {uri:?}"),
    );
    assert_ne!(with_uri, toml_text);
    let file_uri = dir.path().join("with-uri.toml");
    std::fs::write(&file_uri, with_uri).unwrap();
    let out = check_config(&file_uri, &[]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "the Secret example's URI:\n{all}");
    assert!(
        !all.contains("CHANGE-ME"),
        "the password was printed:\n{all}"
    );

    // A member as the pod runs it: the StatefulSet's environment, its
    // index from the pod's hostname (mongoload-2), or set explicitly.
    let mut env = env_of(the_container());
    env.retain(|(k, _)| k.starts_with("MONGOLOAD_"));
    let size = env
        .iter()
        .find(|(k, _)| k == "MONGOLOAD_CLUSTER__SIZE")
        .map(|(_, v)| v.clone())
        .expect("the StatefulSet sets MONGOLOAD_CLUSTER__SIZE");
    let mut from_hostname = env.clone();
    from_hostname.push(("HOSTNAME".into(), "mongoload-2".into()));
    let out = check_config(&file, &from_hostname);
    assert!(
        out.status.success(),
        "check-config as pod mongoload-2 of the StatefulSet:\n{}",
        text(&out.stderr)
    );
    let member = format!("member: 2 of {size} (from the hostname mongoload-2)");
    assert!(text(&out.stdout).contains(&member), "{}", text(&out.stdout));
    let mut beyond = env.clone();
    beyond.push(("MONGOLOAD_CLUSTER__INDEX".into(), size.clone()));
    let out = check_config(&file, &beyond);
    assert_eq!(
        out.status.code(),
        Some(78),
        "index {size} of {size} is out of range"
    );
    assert!(
        text(&out.stderr).contains("cluster.index"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn manifests_agree_with_each_other_the_config_and_the_image() {
    let Some(()) = tools() else { return };
    let sts = object("StatefulSet");
    let svc = object("Service");
    let cm = object("ConfigMap");
    let monitor = object("PodMonitor");
    let pod = &sts["spec"]["template"];
    let c = the_container();
    let (_, cfg) = configmap_toml();

    // Members: N pods, the same N in the cluster size, started in parallel.
    let replicas = sts["spec"]["replicas"].as_u64().expect("replicas");
    let env = env_of(c);
    let size = env
        .iter()
        .find(|(k, _)| k == "MONGOLOAD_CLUSTER__SIZE")
        .map(|(_, v)| v.parse::<u64>().expect("a number"))
        .expect("MONGOLOAD_CLUSTER__SIZE in the container's env");
    assert_eq!(
        size, replicas,
        "MONGOLOAD_CLUSTER__SIZE must equal replicas"
    );
    assert!(
        !env.iter().any(|(k, _)| k == "MONGOLOAD_CLUSTER__INDEX"),
        "the index comes from each pod's hostname, not a shared value"
    );
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
    // Service links would add FOO_SERVICE_HOST-style variables; for a
    // Service named mongoload-* they start with MONGOLOAD_, the prefix of
    // the config overrides.
    assert_eq!(pod["spec"]["enableServiceLinks"], false);

    // Labels: the StatefulSet, the Service and the PodMonitor select the pods.
    let labels = pod["metadata"]["labels"].as_object().expect("pod labels");
    let selects = |sel: &Value, what: &str| {
        for (k, v) in sel
            .as_object()
            .unwrap_or_else(|| panic!("{what}: a selector"))
        {
            assert_eq!(
                labels.get(k),
                Some(v),
                "{what} selects {k}={v}, not on the pods"
            );
        }
    };
    selects(&sts["spec"]["selector"]["matchLabels"], "the StatefulSet");
    selects(&svc["spec"]["selector"], "the Service");
    selects(
        &monitor["spec"]["selector"]["matchLabels"],
        "the PodMonitor",
    );

    // The headless Service governs the StatefulSet.
    assert_eq!(sts["spec"]["serviceName"], svc["metadata"]["name"]);
    assert_eq!(svc["spec"]["clusterIP"], "None");

    // The port: http.listen on every interface, the container's "http" port,
    // probed, in the Service, scraped.
    let listen = cfg.http.listen;
    assert!(
        listen.ip().is_unspecified(),
        "http.listen must be 0.0.0.0 in a pod, is {listen}"
    );
    let port = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "http")
        .expect("a container port named http");
    assert_eq!(port["containerPort"], listen.port());
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "http"})
    );
    // Ready while preparing: a first long prepare neither stalls a rolling
    // update nor blocks a drain; nothing probes while data loads but
    // liveness, which a preparing daemon answers.
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/readyz?preparing=ready", "port": "http"})
    );

    // The recommended labels on every object of the application and on
    // its pods, the version the crate's.
    let pdb = object("PodDisruptionBudget");
    for (what, l) in [
        ("the StatefulSet", &sts["metadata"]["labels"]),
        ("the pods", &pod["metadata"]["labels"]),
        ("the Service", &svc["metadata"]["labels"]),
        ("the ConfigMap", &cm["metadata"]["labels"]),
        ("the PodMonitor", &monitor["metadata"]["labels"]),
        ("the PodDisruptionBudget", &pdb["metadata"]["labels"]),
    ] {
        for key in [
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/version",
            "app.kubernetes.io/component",
            "app.kubernetes.io/part-of",
            "app.kubernetes.io/managed-by",
        ] {
            assert!(l[key].is_string(), "{what} lacks the label {key}: {l}");
        }
        assert_eq!(
            l["app.kubernetes.io/version"],
            env!("CARGO_PKG_VERSION"),
            "{what}'s version label"
        );
    }
    // The disruption budget covers the members and lets one go at a time.
    selects(
        &pdb["spec"]["selector"]["matchLabels"],
        "the PodDisruptionBudget",
    );
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http");
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    assert_eq!(endpoint["port"], "http");
    assert_eq!(endpoint["path"], "/metrics");

    // job="mongoload" (the alert rules' job) from the pod label jobLabel names;
    // instance = the pod name.
    let job_label = monitor["spec"]["jobLabel"].as_str().expect("jobLabel");
    assert_eq!(labels.get(job_label), Some(&json!("mongoload")));
    let rules = std::fs::read_to_string(repo().join("etc/prometheus/mongoload-rules.yml")).unwrap();
    assert!(
        rules.contains("job=\"mongoload\""),
        "the rules no longer name job=\"mongoload\""
    );
    assert!(endpoint["relabelings"].as_array().unwrap().iter().any(|r| {
        r["sourceLabels"] == json!(["__meta_kubernetes_pod_name"]) && r["targetLabel"] == "instance"
    }));

    // SIGTERM: the pod's grace period outlasts run.shutdown_grace, with room
    // for the summary and the last stage report.
    let grace = cfg.run.shutdown_grace;
    let pod_grace = Duration::from_secs(
        pod["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .expect("terminationGracePeriodSeconds"),
    );
    assert!(
        pod_grace >= grace + Duration::from_secs(10),
        "terminationGracePeriodSeconds {pod_grace:?} leaves too little beyond shutdown_grace {grace:?}"
    );

    // Volumes: the ConfigMap where `mongoload run` looks by default, the
    // Secret's key where target.uri_file points, writable mounts for the run
    // log and the control socket (the root file system is read-only).
    let mounts = c["volumeMounts"].as_array().expect("volumeMounts");
    let volumes = pod["spec"]["volumes"].as_array().expect("volumes");
    let mount_of = |path: &Path| -> (&Value, &Value) {
        let m = mounts
            .iter()
            .filter(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .max_by_key(|m| m["mountPath"].as_str().unwrap().len())
            .unwrap_or_else(|| panic!("nothing is mounted at {}", path.display()));
        let v = volumes
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap_or_else(|| panic!("no volume {}", m["name"]));
        (m, v)
    };
    let default_config = Path::new(config::DEFAULT_PATH);
    let (m, v) = mount_of(default_config);
    assert_eq!(v["configMap"]["name"], cm["metadata"]["name"]);
    assert_eq!(
        Path::new(m["mountPath"].as_str().unwrap()).join("mongoload.toml"),
        default_config
    );
    assert!(!c["args"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--config"));

    let uri_file = cfg.target.uri_file.as_deref().expect("target.uri_file");
    let (m, v) = mount_of(uri_file);
    let secret = yaml_doc(&k8s_dir().join("secret.example.yaml"));
    assert_eq!(v["secret"]["secretName"], secret["metadata"]["name"]);
    let key = uri_file
        .strip_prefix(m["mountPath"].as_str().unwrap())
        .unwrap();
    assert!(
        secret["stringData"][key.to_str().unwrap()].is_string(),
        "the Secret has no key {}",
        key.display()
    );
    assert_eq!(m["readOnly"], true);
    // Readable by the pod's group only (fsGroup), not by everyone.
    let mode = v["secret"]["defaultMode"].as_u64().expect("defaultMode");
    assert_eq!(
        mode & 0o007,
        0,
        "the Secret's files must not be world-readable"
    );
    assert!(mode & 0o040 != 0 && pod["spec"]["securityContext"]["fsGroup"].is_u64());

    let log = cfg.run.log.as_deref().expect("run.log");
    let socket = cfg.control.socket.as_deref().expect("control.socket");
    for path in [log, socket] {
        let (m, v) = mount_of(path);
        let p = path.display();
        assert!(
            v["emptyDir"].is_object(),
            "{p} is not on a writable emptyDir"
        );
        assert_ne!(m["readOnly"], true, "{p} is mounted read-only");
    }

    // The image: its user is the pod's, its entrypoint runs `run`.
    let containerfile =
        std::fs::read_to_string(repo().join("packaging/container/Containerfile")).unwrap();
    let user = containerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line");
    let sc = &pod["spec"]["securityContext"];
    assert_eq!(
        user.trim(),
        format!("{}:{}", sc["runAsUser"], sc["runAsGroup"])
    );
    assert!(containerfile.contains("ENTRYPOINT [\"mongoload\"]"));
    assert_eq!(c["args"], json!(["run"]));
    assert!(
        !containerfile
            .lines()
            .any(|l| l.trim_start().starts_with("HEALTHCHECK")),
        "probes are the kubelet's"
    );

    // The image tag follows the crate's version.
    let kustomization = yaml_doc(&k8s_dir().join("kustomization.yaml"));
    let image = &kustomization["images"][0];
    assert_eq!(
        image["newTag"],
        env!("CARGO_PKG_VERSION"),
        "kustomization.yaml's newTag"
    );
    assert_eq!(
        c["image"],
        format!(
            "{}:{}",
            image["newName"].as_str().unwrap(),
            image["newTag"].as_str().unwrap()
        )
    );

    // Resources: requests and limits for both, limits not below requests.
    let res = &c["resources"];
    for r in ["cpu", "memory"] {
        let req = quantity(&res["requests"][r]);
        let lim = quantity(&res["limits"][r]);
        assert!(lim >= req, "{r}: limit {lim} below request {req}");
    }
}

/// A Kubernetes quantity ("500m", "2", "64Mi", "1G") as a number.
fn quantity(v: &Value) -> f64 {
    let s = match v {
        Value::String(s) => s.as_str(),
        Value::Number(n) => return n.as_f64().unwrap(),
        _ => panic!("not a quantity: {v}"),
    };
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("not a quantity: {s}"));
    let k: f64 = match unit {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => panic!("unit {unit} in {s}"),
    };
    n * k
}

#[test]
fn pod_meets_the_restricted_pod_security_standard() {
    let Some(()) = tools() else { return };
    // The namespace enforces "restricted"; these are that profile's rules
    // (kubernetes.io/docs/concepts/security/pod-security-standards) for
    // what the pod uses, plus the read-only root and no API token.
    let ns = object("Namespace");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let spec = &object("StatefulSet")["spec"]["template"]["spec"];
    let psc = &spec["securityContext"];
    assert_eq!(psc["runAsNonRoot"], true);
    assert!(psc["runAsUser"].as_u64().is_some_and(|u| u != 0));
    assert_eq!(psc["seccompProfile"]["type"], "RuntimeDefault");
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        assert_ne!(spec[host], true, "{host}");
    }
    assert_eq!(spec["automountServiceAccountToken"], false);
    let allowed = [
        "configMap",
        "secret",
        "emptyDir",
        "projected",
        "downwardAPI",
        "persistentVolumeClaim",
    ];
    for v in spec["volumes"].as_array().unwrap() {
        let kinds: Vec<&String> = v
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "name")
            .collect();
        assert!(
            kinds.iter().all(|k| allowed.contains(&k.as_str())),
            "volume {} of type {kinds:?}",
            v["name"]
        );
    }
    let c = the_container();
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_ne!(sc["privileged"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert!(
        sc["capabilities"]["add"].is_null(),
        "no capability is added"
    );
    assert!(c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["hostPort"].is_null()));
}

/// The label name Prometheus' Kubernetes discovery gives a pod label
/// (`app.kubernetes.io/name` → `app_kubernetes_io_name`).
fn sanitize(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_example_relabels_each_member_to_its_pod_name() {
    // A real Prometheus runs the example's relabelling on targets that carry
    // the labels its Kubernetes pod discovery would give the StatefulSet's
    // pods (Debian's Prometheus has no Kubernetes discovery, so static
    // targets stand in for the API server), all pointing at one real daemon.
    let Some(()) = tools() else { return };
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    let sim = crate::common::sim().await;
    let stages = "[[workloads.stages]]\nrate = 20\nduration = \"1h\"\n";
    let (_file, daemon) =
        crate::common::start_daemon(&crate::common::config_toml(&sim.uri(), stages)).await;
    let address = daemon.http_addr.to_string();

    let sts = object("StatefulSet");
    let c = the_container();
    let port = c["ports"][0]["name"].as_str().unwrap();
    let pod_meta = |pod: &str, labels: &serde_json::Map<String, Value>, port: &str| {
        let mut meta = serde_json::Map::new();
        meta.insert("__meta_kubernetes_namespace".into(), json!(NAMESPACE));
        meta.insert("__meta_kubernetes_pod_name".into(), json!(pod));
        meta.insert(
            "__meta_kubernetes_pod_container_name".into(),
            c["name"].clone(),
        );
        meta.insert(
            "__meta_kubernetes_pod_container_port_name".into(),
            json!(port),
        );
        for (k, v) in labels {
            meta.insert(
                format!("__meta_kubernetes_pod_label_{}", sanitize(k)),
                v.clone(),
            );
        }
        json!({ "targets": [address], "labels": meta })
    };
    let labels = sts["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    let replicas = sts["spec"]["replicas"].as_u64().unwrap();
    let pods: Vec<String> = (0..replicas).map(|i| format!("mongoload-{i}")).collect();
    let mut groups: Vec<Value> = pods.iter().map(|p| pod_meta(p, labels, port)).collect();
    // Dropped: another port of a member, and a pod of another application.
    groups.push(pod_meta("mongoload-0", labels, "debug"));
    let mut other = labels.clone();
    other.insert("app.kubernetes.io/name".into(), json!("other"));
    groups.push(pod_meta("other-0", &other, port));

    let mut config = yaml_doc(&k8s_dir().join("prometheus-scrape.yml"));
    config["global"]["scrape_interval"] = json!("1s");
    config.as_object_mut().unwrap().remove("rule_files");
    let job = config["scrape_configs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|j| j["job_name"] == "mongoload")
        .unwrap();
    let job = job.as_object_mut().unwrap();
    job.remove("kubernetes_sd_configs")
        .expect("kubernetes_sd_configs");
    job.insert("static_configs".into(), json!(groups));
    job.insert("scrape_interval".into(), json!("1s"));
    job.insert("scrape_timeout".into(), json!("1s"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prometheus.yml");
    write_json(&file, &[config]);

    let web = crate::common::free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _prometheus = crate::common::ChildGuard::new(
        Command::new(prometheus)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus"),
    );
    let api = |path: String| async move {
        let reply = crate::common::get(web, &path).await.ok()?;
        let v: Value = serde_json::from_str(&reply.body).ok()?;
        (v["status"] == "success").then(|| v["data"].clone())
    };

    // Every member is a target of job "mongoload", named by its pod, and up.
    let targets =
        crate::common::wait_for("the members to be scraped", Duration::from_secs(90), || {
            let (api, pods) = (&api, &pods);
            async move {
                let data = api("/api/v1/targets".into()).await?;
                let active = data["activeTargets"].as_array()?.clone();
                (active.len() == pods.len() && active.iter().all(|t| t["health"] == "up"))
                    .then_some(data)
            }
        })
        .await;
    let mut seen: Vec<Value> = targets["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["labels"].clone())
        .collect();
    seen.sort_by_key(|l| l["instance"].as_str().unwrap_or("").to_owned());
    let want: Vec<Value> = pods
        .iter()
        .map(|p| {
            json!({ "job": "mongoload", "instance": p, "pod": p, "namespace": NAMESPACE,
                    "container": c["name"] })
        })
        .collect();
    assert_eq!(seen, want, "the members' target labels");
    assert_eq!(
        targets["droppedTargets"].as_array().map(Vec::len),
        Some(2),
        "the other port and the other application are dropped"
    );

    // Their metrics carry those labels: one series per member.
    let instances = crate::common::wait_for(
        "mongoload_build_info per member",
        Duration::from_secs(30),
        || {
            let (api, pods) = (&api, &pods);
            async move {
                let q = "/api/v1/query?query=mongoload_build_info%7Bjob%3D%22mongoload%22%7D";
                let data = api(q.into()).await?;
                let mut got: Vec<String> = data["result"]
                    .as_array()?
                    .iter()
                    .filter_map(|s| s["metric"]["instance"].as_str().map(str::to_owned))
                    .collect();
                got.sort();
                (got.len() == pods.len()).then_some(got)
            }
        },
    )
    .await;
    assert_eq!(instances, pods);
    daemon.stop();
}
