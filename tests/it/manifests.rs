//! The pods of `deploy/` pass Pod Security "restricted" and run as a platform team needs
//! (issue 44, points 6 and 8): every manifest is parsed as YAML (PyYAML, the parser
//! kubernetes-validate uses) and every pod template checked field by field: non-root, no
//! privilege escalation, every capability dropped, a seccomp profile, only the volume types the
//! profile allows, a read-only root filesystem with an emptyDir at /tmp (TMPDIR), an image
//! pinned by tag and digest; the Indexed Job's retries agree with `--index-retries` and its pods
//! know their index's failure count. `deploy/k8s/rerun/rerun.sh` makes one Job per index, named
//! after it. (The schemas themselves: `deploy/validate-manifests.sh`, in `.ci/run`.)

use crate::docs::{deploy_manifests, repo};
use serde_json::Value;
use std::process::Command;

/// Every YAML document of `text` as JSON, parsed by PyYAML's `safe_load_all`.
fn yaml_documents(name: &str, text: &str) -> Vec<Value> {
    let (python, path) =
        crate::support::python_with("yaml", "PyYAML==6.0.2", "apt-get install python3-yaml");
    let mut cmd = Command::new(python);
    if let Some(p) = path {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd
        .args([
            "-c",
            "import json, sys, yaml\n\
             print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d is not None]))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The pod template of a workload (CronJob, Job), with where it is.
fn pod_spec(doc: &Value) -> Option<(&'static str, &Value)> {
    match doc["kind"].as_str()? {
        "CronJob" => Some((
            "spec.jobTemplate.spec.template.spec",
            &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        )),
        "Job" => Some(("spec.template.spec", &doc["spec"]["template"]["spec"])),
        _ => None,
    }
}

/// What a pod spec lacks of Pod Security "restricted" (v1.31) and of recon's own rules (a
/// read-only root with an emptyDir at /tmp, a pinned image): one line each.
fn restricted_violations(pod: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[key] == Value::Bool(true) {
            bad.push(format!("{key}: true"));
        }
    }
    let psc = &pod["securityContext"];
    const ALLOWED_VOLUMES: [&str; 8] = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
    for v in &volumes {
        let kinds: Vec<&String> = v
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "name")
            .collect();
        for k in kinds {
            if !ALLOWED_VOLUMES.contains(&k.as_str()) {
                bad.push(format!("volume {}: type {k}", v["name"]));
            }
        }
    }
    let empty_dirs: Vec<&str> = volumes
        .iter()
        .filter(|v| v.get("emptyDir").is_some())
        .filter_map(|v| v["name"].as_str())
        .collect();
    let containers = ["initContainers", "containers"]
        .iter()
        .flat_map(|k| pod[k].as_array().cloned().unwrap_or_default());
    for c in containers {
        let name = c["name"].as_str().unwrap_or("?").to_string();
        let sc = &c["securityContext"];
        let either = |key: &str| {
            if sc[key].is_null() {
                &psc[key]
            } else {
                &sc[key]
            }
        };
        if either("runAsNonRoot") != &Value::Bool(true) {
            bad.push(format!("{name}: runAsNonRoot is not true"));
        }
        if either("runAsUser").as_i64() == Some(0) {
            bad.push(format!("{name}: runAsUser 0"));
        }
        let seccomp = either("seccompProfile")["type"].as_str();
        if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
            bad.push(format!("{name}: seccompProfile.type is {seccomp:?}"));
        }
        if sc["allowPrivilegeEscalation"] != Value::Bool(false) {
            bad.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        if sc["privileged"] == Value::Bool(true) {
            bad.push(format!("{name}: privileged"));
        }
        let drop: Vec<&str> = sc["capabilities"]["drop"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !drop.contains(&"ALL") {
            bad.push(format!("{name}: capabilities.drop lacks ALL"));
        }
        for add in sc["capabilities"]["add"].as_array().into_iter().flatten() {
            if add.as_str() != Some("NET_BIND_SERVICE") {
                bad.push(format!("{name}: capabilities.add {add}"));
            }
        }
        if sc["readOnlyRootFilesystem"] != Value::Bool(true) {
            bad.push(format!("{name}: readOnlyRootFilesystem is not true"));
        }
        let tmp = c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["mountPath"] == "/tmp");
        match tmp.and_then(|m| m["name"].as_str()) {
            Some(v) if empty_dirs.contains(&v) => {}
            other => bad.push(format!("{name}: /tmp is not an emptyDir ({other:?})")),
        }
        let image = c["image"].as_str().unwrap_or("");
        let (named, digest) = image.split_once("@sha256:").unwrap_or((image, ""));
        let tag = named.rsplit('/').next().and_then(|n| n.split_once(':'));
        if digest.len() != 64 || !matches!(tag, Some((_, t)) if !t.is_empty() && t != "latest") {
            bad.push(format!(
                "{name}: image {image:?} is not pinned by tag and digest"
            ));
        }
    }
    bad
}

#[test]
fn every_pod_under_deploy_passes_the_restricted_profile_with_a_pinned_image() {
    let mut checked = Vec::new();
    let mut bad = Vec::new();
    for (name, text) in deploy_manifests() {
        for doc in yaml_documents(&name, &text) {
            let Some((at, pod)) = pod_spec(&doc) else {
                continue;
            };
            let what = format!("{name} {} {}", doc["kind"], doc["metadata"]["name"]);
            for v in restricted_violations(pod) {
                bad.push(format!("{what} ({at}): {v}"));
            }
            checked.push(what);
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The finder found every workload: the nightly CronJob, the shards, both by-hand Jobs.
    for want in [
        "recon-nightly",
        "recon-shards",
        "recon-rerun-2026-12-02-shard-2",
        "recon-gather-2026-12-02",
    ] {
        assert!(
            checked.iter().any(|c| c.contains(want)),
            "{want} not checked: {checked:?}"
        );
    }
}

#[test]
fn the_restricted_check_finds_what_a_pod_lacks() {
    let text = std::fs::read_to_string(repo().join("deploy/k8s/recon-shards.yaml")).unwrap();
    let doc = yaml_documents("recon-shards.yaml", &text).remove(0);
    let pod = pod_spec(&doc).unwrap().1.clone();
    assert_eq!(restricted_violations(&pod), Vec::<String>::new());
    let mut worse = pod.clone();
    let c = &mut worse["containers"][0];
    c["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("allowPrivilegeEscalation");
    c["securityContext"]["capabilities"] = serde_json::json!({"add": ["SYS_ADMIN"]});
    c["image"] = Value::from("recon:latest");
    worse["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("seccompProfile");
    worse["volumes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "host", "hostPath": {"path": "/"}}));
    let found = restricted_violations(&worse);
    for want in [
        "recon: allowPrivilegeEscalation is not false",
        "recon: capabilities.drop lacks ALL",
        "recon: capabilities.add \"SYS_ADMIN\"",
        "recon: image \"recon:latest\" is not pinned",
        "recon: seccompProfile.type is None",
        "migrate: seccompProfile.type is None",
        "volume \"host\": type hostPath",
    ] {
        assert!(
            found.iter().any(|f| f.starts_with(want)),
            "{want}: {found:#?}"
        );
    }
}

/// The Indexed Job: each pod knows how often its index failed (the annotation Kubernetes keeps
/// with backoffLimitPerIndex), `--index-retries` is the Job's backoffLimitPerIndex, and the
/// last shard gathers (`--gather`).
#[test]
fn the_shards_job_passes_its_retries_and_failure_count_to_recon() {
    let text = std::fs::read_to_string(repo().join("deploy/k8s/recon-shards.yaml")).unwrap();
    let doc = yaml_documents("recon-shards.yaml", &text).remove(0);
    let job = &doc["spec"]["jobTemplate"]["spec"];
    assert_eq!(job["completionMode"], "Indexed");
    let container = &job["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let after = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
    assert_eq!(
        after("--index-retries").map(str::to_string),
        Some(job["backoffLimitPerIndex"].to_string()),
        "{args:?}"
    );
    assert!(args.contains(&"--gather"), "{args:?}");
    let env = container["env"].as_array().unwrap();
    let count = env
        .iter()
        .find(|e| e["name"] == "RECON_INDEX_FAILURE_COUNT")
        .expect("RECON_INDEX_FAILURE_COUNT");
    assert_eq!(
        count["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"
    );
    // Exit 3 fails the index at once: recon treats it as the index's last attempt too.
    let fail_index = job["podFailurePolicy"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["action"] == "FailIndex")
        .unwrap();
    assert!(
        fail_index["onExitCodes"]["values"]
            .as_array()
            .unwrap()
            .contains(&Value::from(3))
    );
}

/// Two failed indexes of one night are re-run at once: `rerun.sh I D` names each Job after its
/// night and index, runs exactly that shard with --gather, and refuses an index the night does
/// not have.
#[test]
fn rerun_jobs_are_generated_one_per_index_with_the_index_in_their_name() {
    let script = repo().join("deploy/k8s/rerun/rerun.sh");
    let make = |index: &str, date: &str| {
        Command::new("bash")
            .arg(&script)
            .args([index, date])
            .output()
            .unwrap()
    };
    let mut names = Vec::new();
    for index in ["1", "3"] {
        let out = make(index, "2026-12-09");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc = yaml_documents("rerun.sh", &String::from_utf8(out.stdout).unwrap()).remove(0);
        let name = doc["metadata"]["name"].as_str().unwrap().to_string();
        assert_eq!(name, format!("recon-rerun-2026-12-09-shard-{index}"));
        let args: Vec<&str> = doc["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let shard = format!("{index}/4");
        for (flag, value) in [
            ("--shard", shard.as_str()),
            ("--date", "2026-12-09"),
            ("--group", "2026-12-09"),
        ] {
            let i = args.iter().position(|a| *a == flag).unwrap();
            assert_eq!(args[i + 1], value, "{args:?}");
        }
        assert!(args.contains(&"--gather"));
        assert_eq!(
            restricted_violations(&doc["spec"]["template"]["spec"]),
            Vec::<String>::new()
        );
        names.push(name);
    }
    assert_ne!(names[0], names[1]);
    let out = make("4", "2026-12-09");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("INDEX must be 0 to 3"));
}
