#!/usr/bin/env python3
"""The Kubernetes manifests of deploy/k8s/, offline: every resource validates (strictly: no
unknown field) against the Kubernetes 1.30 schemas that PyPI's kubernetes-validate ships, the
Grafana ConfigMaps are what make_grafana_configmaps.py writes from deploy/grafana/ (dashboards
byte for byte), the pieces agree with each other and with the programs' flags, every pod runs
under the RuntimeDefault seccomp profile without a service account token, and the NetworkPolicies
let through only what the design needs (checked by evaluating them for a set of connections).
  k8s_test.py SOURCE_DIR SPHERET_WORKER SPHERET_COORDINATOR   (exit 77: validator not installed)"""
import json
import os
import re
import subprocess
import sys

try:
    import yaml  # PyYAML, a dependency of kubernetes-validate
except ImportError:
    yaml = None

source, worker_bin, coordinator_bin = sys.argv[1:4]
k8s = os.path.join(source, "deploy", "k8s")
validator = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
if yaml is None or not os.path.exists(validator):
    print("kubernetes-validate is not installed in this Python (make deps installs it)")
    sys.exit(77)
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


manifests = sorted(os.path.join(k8s, f) for f in os.listdir(k8s) if f.endswith(".yaml"))
result = subprocess.run([validator, "--strict", "--no-warn", "-k", "1.30.0"] + manifests,
                        capture_output=True, text=True)
check(result.returncode == 0, "kubernetes-validate:\n" + result.stdout + result.stderr)
passed = result.stdout.count(" passed for resource ")

docs = {}
for path in manifests:
    for doc in yaml.safe_load_all(open(path)):
        if doc:
            docs[(doc["kind"], doc["metadata"]["name"])] = doc

generated = subprocess.run([sys.executable, os.path.join(k8s, "make_grafana_configmaps.py"),
                            "--out", "-"], capture_output=True, text=True, check=True).stdout
check(generated == open(os.path.join(k8s, "grafana.yaml")).read(),
      "deploy/k8s/grafana.yaml is stale: run deploy/k8s/make_grafana_configmaps.py")
dashboards = docs[("ConfigMap", "spheret-grafana-dashboards")]["data"]
dashboard_dir = os.path.join(source, "deploy", "grafana", "dashboards")
for name in os.listdir(dashboard_dir):
    text = open(os.path.join(dashboard_dir, name)).read()
    check(dashboards.get(name, "").rstrip("\n") == text.rstrip("\n"), f"{name} differs")
    json.loads(dashboards.get(name, "{}"))

coordinator = docs[("StatefulSet", "spheret-coordinator")]["spec"]["template"]
workers = docs[("DaemonSet", "spheret-worker")]["spec"]["template"]
c_args = coordinator["spec"]["containers"][0]["args"]
w_container = workers["spec"]["containers"][0]
w_args = w_container["args"]


def flag(args, name):
    for arg in args:
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


# Every flag the manifests pass is one the program knows.
for binary, args in ((coordinator_bin, c_args), (worker_bin, w_args)):
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    for arg in args:
        check(arg.split("=")[0] in help_text, f"{os.path.basename(binary)} has no flag {arg}")
grace_s = int(flag(w_args, "--grace")) / 1000
check(workers["spec"]["terminationGracePeriodSeconds"] >= grace_s + 10,
      "the worker's terminationGracePeriodSeconds must exceed --grace plus the hand-back")
check(flag(w_args, "--worker-id") == "$(NODE_NAME)", "a worker's id is its node's name")
node_name = [e for e in w_container["env"] if e["name"] == "NODE_NAME"][0]
check(node_name["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName",
      "NODE_NAME is the pod's node (downward API)")


def secret_names(volume):
    names = [volume.get("secret", {}).get("secretName")]
    names += [source.get("secret", {}).get("name")
              for source in volume.get("projected", {}).get("sources", [])]
    return names


# A pod sees only its own node's token: every mount of the token secret is the key named after
# the node (subPathExpr), never the whole secret with every node's token in it.
token_volumes = {v["name"] for v in workers["spec"]["volumes"]
                 if "spheret-worker-tokens" in secret_names(v)}
check(len(token_volumes) == 1, "the worker tokens are one volume of the DaemonSet")
token_mounts = [m for c in workers["spec"]["containers"] + workers["spec"].get("initContainers", [])
                for m in c.get("volumeMounts", []) if m["name"] in token_volumes]
check(len(token_mounts) == 1, "the worker container mounts the tokens once")
for mount in token_mounts:
    check(mount.get("subPathExpr") == "$(NODE_NAME)" and "subPath" not in mount,
          f"{mount['mountPath']} mounts every node's token, not only the pod's own")
    check(flag(w_args, "--token-file") == mount["mountPath"],
          "--token-file is the mounted token of the pod's node")
check("nvidia.com/gpu" in w_container["resources"]["limits"], "workers request nvidia.com/gpu")
gpus = [e["value"] for e in w_container["env"] if e["name"] == "SPHERET_GPUS"][0].split(",")
check(len(gpus) == int(w_container["resources"]["limits"]["nvidia.com/gpu"]),
      "SPHERET_GPUS lists as many GPUs as the pod asks for")
service = docs[("Service", "spheret-coordinator")]
grpc_port = [p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc"][0]
check(flag(w_args, "--coordinator") == f"spheret-coordinator.spheret.svc:{grpc_port}",
      "workers dial the coordinator's Service")
for template, args in ((coordinator, c_args), (workers, w_args)):
    port = template["metadata"]["annotations"]["prometheus.io/port"]
    check(flag(args, "--metrics-listen") == f"0.0.0.0:{port}",
          "the scrape annotation names the /metrics port")
    check(template["spec"]["securityContext"]["runAsNonRoot"], "pods run as a non-root user")
dockerfile = open(os.path.join(source, "deploy", "docker", "Dockerfile")).read()
check(re.search(r"^USER 10001", dockerfile, re.M) is not None and
      coordinator["spec"]["securityContext"]["runAsUser"] == 10001,
      "the image's user is the pods' runAsUser")


# Issue 44, item 13: every pod runs under the runtime's seccomp filter and without a service
# account token (nothing of spheret calls the Kubernetes API).
workloads = [d for d in docs.values() if d["kind"] in
             ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")]
check(len(workloads) >= 2, "the coordinator and the workers are workloads")
for doc in workloads:
    pod = doc["spec"]["template"]["spec"] if doc["kind"] != "Pod" else doc["spec"]
    name = f"{doc['kind']} {doc['metadata']['name']}"
    check(pod.get("automountServiceAccountToken") is False,
          f"{name}: automountServiceAccountToken must be false")
    check(pod.get("securityContext", {}).get("seccompProfile") == {"type": "RuntimeDefault"},
          f"{name}: the pod's securityContext needs seccompProfile {{type: RuntimeDefault}}")
    for container in pod["containers"] + pod.get("initContainers", []):
        profile = container.get("securityContext", {}).get("seccompProfile")
        check(profile in (None, {"type": "RuntimeDefault"}),
              f"{name}: container {container['name']} overrides the seccomp profile")

# The NetworkPolicies, evaluated as a plugin that enforces them would: a connection needs the
# source's egress and the destination's ingress allowed (a pod no policy selects is open).
policies = [d for d in docs.values() if d["kind"] == "NetworkPolicy"]


def selects(selector, labels):
    check("matchExpressions" not in selector, "the policies use matchLabels only")
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def peer_matches(peer, policy_ns, pod):
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        in_namespace = selects(peer["namespaceSelector"], pod["ns_labels"])
    else:
        in_namespace = pod["ns"] == policy_ns
    return in_namespace and selects(peer.get("podSelector", {}), pod["labels"])


def admits(pod, direction, other, port, protocol):
    selecting = [p for p in policies if p["metadata"]["namespace"] == pod["ns"]
                 and selects(p["spec"]["podSelector"], pod["labels"])
                 and direction.capitalize() in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get(direction, []):
            peers = rule.get("from" if direction == "ingress" else "to")
            ports = rule.get("ports")
            peer_ok = peers is None or any(peer_matches(p, pod["ns"], other) for p in peers)
            port_ok = ports is None or any(
                p.get("port") in (None, port) and p.get("protocol", "TCP") == protocol
                for p in ports)
            if peer_ok and port_ok:
                return True
    return False


def reaches(source, destination, port, protocol="TCP"):
    return (admits(source, "egress", destination, port, protocol) and
            admits(destination, "ingress", source, port, protocol))


def pod(ns, labels, **ns_labels):
    return {"ns": ns, "labels": labels,
            "ns_labels": {"kubernetes.io/metadata.name": ns, **ns_labels}}


name_label = "app.kubernetes.io/name"
coordinator_pod = pod("spheret", coordinator["metadata"]["labels"])
worker_pod = pod("spheret", workers["metadata"]["labels"])
other_worker = pod("spheret", workers["metadata"]["labels"])
prometheus = pod("monitoring", {name_label: "prometheus"})
grafana_here = pod("spheret", {name_label: "grafana"})
grafana_there = pod("monitoring", {name_label: "grafana"})
cli = pod("research", {}, **{"spheret.io/clients": "true"})
stranger = pod("default", {"app": "web"})
debug_here = pod("spheret", {"app": "debug"})
dns = pod("kube-system", {"k8s-app": "kube-dns"})
c_grpc, c_metrics = 7070, int(coordinator["metadata"]["annotations"]["prometheus.io/port"])
w_metrics = int(workers["metadata"]["annotations"]["prometheus.io/port"])
check(any(p["kind"] == "NetworkPolicy" and p["spec"]["podSelector"] == {} and
          set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"} for p in policies),
      "a default-deny NetworkPolicy isolates every pod of the namespace both ways")
for source, destination, port, protocol, expected, what in [
        (worker_pod, coordinator_pod, c_grpc, "TCP", True, "a worker reaches the coordinator"),
        (cli, coordinator_pod, c_grpc, "TCP", True, "the CLI's namespace reaches gRPC"),
        (prometheus, coordinator_pod, c_metrics, "TCP", True, "Prometheus scrapes the coordinator"),
        (prometheus, worker_pod, w_metrics, "TCP", True, "Prometheus scrapes the workers"),
        (worker_pod, other_worker, 29500, "TCP", True, "a gang's rendezvous between workers"),
        (worker_pod, other_worker, 45123, "TCP", True, "NCCL/Gloo on a free port between workers"),
        (worker_pod, dns, 53, "UDP", True, "workers resolve names"),
        (coordinator_pod, dns, 53, "UDP", True, "the coordinator resolves names"),
        (grafana_here, prometheus, 9090, "TCP", True, "Grafana reads Prometheus"),
        (stranger, coordinator_pod, c_grpc, "TCP", False, "another namespace reaches gRPC"),
        (stranger, worker_pod, 29500, "TCP", False, "another namespace reaches a worker"),
        (debug_here, coordinator_pod, c_grpc, "TCP", False, "any pod of the namespace reaches gRPC"),
        (prometheus, coordinator_pod, c_grpc, "TCP", False, "Prometheus reaches gRPC"),
        (cli, coordinator_pod, c_metrics, "TCP", False, "the CLI's namespace reaches /metrics"),
        (worker_pod, coordinator_pod, c_metrics, "TCP", False, "a worker reaches /metrics"),
        (grafana_here, coordinator_pod, c_grpc, "TCP", False, "Grafana reaches gRPC"),
        (grafana_here, coordinator_pod, c_metrics, "TCP", False, "Grafana reaches /metrics"),
        (grafana_there, coordinator_pod, c_metrics, "TCP", False, "monitoring's Grafana scrapes"),
        (grafana_here, stranger, 443, "TCP", False, "Grafana reaches anything but Prometheus"),
        (coordinator_pod, worker_pod, w_metrics, "TCP", False, "the coordinator dials out"),
        (worker_pod, stranger, 443, "TCP", False, "a worker (a trainer) dials out"),
]:
    check(reaches(source, destination, port, protocol) == expected,
          f"NetworkPolicy: {what} on {port}/{protocol} should be "
          f"{'allowed' if expected else 'refused'}")
check(worker_pod["labels"].get(name_label) == "spheret-worker" and
      coordinator_pod["labels"].get(name_label) == "spheret-coordinator",
      "the policies select the pods by app.kubernetes.io/name")

for failure in failures:
    print("FAIL:", failure)
print(f"k8s: {passed} resources validated, {len(failures)} problem(s)")
sys.exit(1 if failures else 0)
