"""Invariants that tie the rendered Kubernetes manifests to the Tandem binaries.

Every check takes the objects of one rendered overlay (a list of dicts, as `kubectl
kustomize` prints them) and returns a list of error strings ([] = fine), each naming the
object and what is wrong. The facts about the binaries (their flags, what `tandem up
--dry-run` derives from the cluster description) are passed in, so the checks can be
unit-tested with deliberate mutations.

Programs: a Tandem container runs the image's entry point with the program as its first
argument (`coordinator`, `worker`, `tandem`), then `--name=value` flags. The bench Job
runs `tandem bench` through `sh -c` with the bench flags as its args.
"""

import json
import re
import shlex
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

WORKER_PORT_FLAGS = {"listen": "grpc"}
COORDINATOR_PORT_FLAGS = {"listen": "grpc", "metrics_listen": "metrics",
                          "rendezvous_listen": "rendezvous"}
# Flags that are addresses or per-pod identities on a cluster: compared with the cluster
# description by their own checks, not value for value.
ADDRESS_FLAGS = {
    "coordinator": {"target", "draft"},
    "worker": {"listen", "rendezvous", "rendezvous_dir", "run_id", "hostname", "rank"},
}
RANK_LABELS = {"StatefulSet": "apps.kubernetes.io/pod-index",
               "LeaderWorkerSet": "leaderworkerset.sigs.k8s.io/worker-index"}
RUN_ID_LABELS = {"StatefulSet": "controller-revision-hash",
                 "LeaderWorkerSet": "leaderworkerset.sigs.k8s.io/template-revision-hash"}
IMAGE_MODELS_ROOT = "/opt/tandem/models"
COMPONENT = "app.kubernetes.io/component"


# ---- Views of the rendered objects ----------------------------------------------------

def obj_name(obj: dict) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def pod_templates(obj: dict) -> List[dict]:
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
        return [spec.get("template") or {}]
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        return [t for t in (lwt.get("workerTemplate"), lwt.get("leaderTemplate")) if t]
    return []


class Program:
    """One Tandem program in a container: which one and its flags (in order)."""

    def __init__(self, workload: dict, template: dict, container: dict, program: str,
                 flags: List[Tuple[str, str]], errors: List[str]):
        self.workload, self.template, self.container = workload, template, container
        self.program, self.flag_list, self.parse_errors = program, flags, errors
        self.flags = dict(flags)  # Last one wins, as with absl flags.
        self.component = ((template.get("metadata") or {}).get("labels") or {}).get(COMPONENT)
        self.where = f"{obj_name(workload)} container {container.get('name')}"

    def port(self, flag: str) -> Optional[int]:
        value = self.flags.get(flag)
        return split_address(value)[1] if value else None


def split_address(value: str) -> Tuple[str, Optional[int]]:
    host, _, port = value.rpartition(":")
    return host, int(port) if port.isdigit() else None


def parse_flags(tokens: Sequence[str], where: str) -> Tuple[List[Tuple[str, str]], List[str]]:
    flags, errors = [], []
    for token in tokens:
        m = re.fullmatch(r"--([A-Za-z0-9_-]+)=(.*)", token, re.S)
        if not m:
            errors.append(f"{where}: argument {token!r} is not of the form --name=value")
            continue
        flags.append((m.group(1), m.group(2)))
    return flags, errors


def programs(objects: Iterable[dict]) -> List[Program]:
    """Every container of a workload that runs a Tandem program."""
    found = []
    for obj in objects:
        for template in pod_templates(obj):
            for container in (template.get("spec") or {}).get("containers") or []:
                command, args = container.get("command") or [], container.get("args") or []
                where = f"{obj_name(obj)} container {container.get('name')}"
                if not command and args and args[0] in ("coordinator", "worker", "tandem"):
                    program, tokens = args[0], args[1:]
                    if program == "tandem" and tokens:
                        program, tokens = f"tandem {tokens[0]}", tokens[1:]
                elif command[:2] == ["/bin/sh", "-c"] and len(command) >= 3 and \
                        re.search(r"\btandem bench\b", command[2]):
                    program, tokens = "tandem bench", args
                    script_tokens = shlex.split(command[2].split(";")[0])
                    tokens = [t for t in script_tokens[2:] if t.startswith("--")] + list(tokens)
                else:
                    continue
                flags, errors = parse_flags(tokens, where)
                found.append(Program(obj, template, container, program, flags, errors))
    return found


def by_component(progs: List[Program], component: str) -> List[Program]:
    return [p for p in progs if p.component == component]


def selects(selector: dict, labels: dict) -> bool:
    """Does `selector` pick pods with `labels`? A LabelSelector (matchLabels and/or
    matchExpressions; empty = every pod) or a Service selector (a plain map; empty =
    no pod)."""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, op, values = labels.get(expr["key"]), expr["operator"], expr.get("values") or []
        if (op == "In" and value not in values) or (op == "NotIn" and value in values) or \
                (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return True


def template_labels(template: dict) -> dict:
    return (template.get("metadata") or {}).get("labels") or {}


def of_kind(objects: Iterable[dict], kind: str) -> List[dict]:
    return [o for o in objects if o.get("kind") == kind]


# ---- Checks -------------------------------------------------------------------------------

def check_flags_known(objects: List[dict], program_flags: Dict[str, Set[str]]) -> List[str]:
    """Every flag a manifest passes is one the program accepts (its --help)."""
    errors = []
    for p in programs(objects):
        errors += p.parse_errors
        known = program_flags.get(p.program)
        if known is None:
            errors.append(f"{p.where}: unknown program {p.program!r}")
            continue
        for name, _ in p.flag_list:
            if name.replace("-", "_") not in known:
                errors.append(f"{p.where}: {p.program} has no flag --{name}")
    return errors


def container_ports(container: dict) -> Dict[str, int]:
    return {port.get("name"): port.get("containerPort") for port in container.get("ports") or []}


def check_ports_and_probes(objects: List[dict]) -> List[str]:
    """Listen flags, container ports, probes and the metrics annotation agree."""
    errors = []
    for p in programs(objects):
        if p.program not in ("coordinator", "worker"):
            continue
        port_flags = COORDINATOR_PORT_FLAGS if p.program == "coordinator" else WORKER_PORT_FLAGS
        ports = container_ports(p.container)
        served = {}
        for flag, port_name in port_flags.items():
            if flag not in p.flags:
                errors.append(f"{p.where}: --{flag} is not set")
                continue
            host, port = split_address(p.flags[flag])
            if host != "0.0.0.0" or port is None:
                errors.append(f"{p.where}: --{flag}={p.flags[flag]} must listen on 0.0.0.0:PORT")
                continue
            served[flag] = port
            if ports.get(port_name) != port:
                errors.append(f"{p.where}: containerPort {port_name!r} is {ports.get(port_name)}, "
                              f"but --{flag} listens on {port}")
        extra = set(ports.values()) - set(served.values())
        if extra:
            errors.append(f"{p.where}: container ports {sorted(extra)} are served by no flag")
        grpc_ports = {v for k, v in served.items() if k != "metrics_listen"}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            spec = p.container.get(probe)
            if spec is None:
                if probe != "startupProbe":
                    errors.append(f"{p.where}: no {probe}")
                continue
            if "grpc" not in spec:
                errors.append(f"{p.where}: {probe} is not a gRPC health probe")
            elif spec["grpc"].get("port") not in grpc_ports:
                errors.append(f"{p.where}: {probe} probes port {spec['grpc'].get('port')}, "
                              f"which serves no gRPC (served: {sorted(grpc_ports)})")
        readiness = (p.container.get("readinessProbe") or {}).get("grpc", {}).get("port")
        if "listen" in served and readiness is not None and readiness != served["listen"]:
            errors.append(f"{p.where}: readinessProbe must probe the --listen port "
                          f"{served['listen']}, not {readiness}")
        annotations = (p.template.get("metadata") or {}).get("annotations") or {}
        if "prometheus.io/port" in annotations and \
                annotations["prometheus.io/port"] != str(served.get("metrics_listen")):
            errors.append(f"{p.where}: prometheus.io/port {annotations['prometheus.io/port']} "
                          f"is not the --metrics_listen port {served.get('metrics_listen')}")
    return errors


def service_backend_port(objects: List[dict], service: dict, port: int) -> Tuple[Optional[int], str]:
    """The container port a Service port reaches, or (None, why)."""
    spec = service.get("spec") or {}
    entry = next((sp for sp in spec.get("ports") or [] if sp.get("port") == port), None)
    if entry is None:
        return None, f"{obj_name(service)} has no port {port}"
    target = entry.get("targetPort", port)
    for p in programs(objects):
        if not selects(spec.get("selector") or {}, template_labels(p.template)):
            continue
        if isinstance(target, int):
            return target, ""
        ports = container_ports(p.container)
        if target in ports:
            return ports[target], ""
        return None, f"{obj_name(service)} targetPort {target!r} is not a port of {p.where}"
    return None, f"{obj_name(service)} selects no Tandem pod"


def check_services(objects: List[dict]) -> List[str]:
    """Every Service selects Tandem pods and every port reaches a served container port."""
    errors = []
    for service in of_kind(objects, "Service"):
        for entry in (service.get("spec") or {}).get("ports") or []:
            backend, why = service_backend_port(objects, service, entry.get("port"))
            if backend is None:
                errors.append(why)
    return errors


def headless_service_for(objects: List[dict], name: str) -> Optional[dict]:
    for s in of_kind(objects, "Service"):
        if s["metadata"]["name"] == name:
            return s
    return None


def check_addresses(objects: List[dict]) -> List[str]:
    """--target/--draft reach rank 0 / the draft pod; --rendezvous reaches the coordinator."""
    errors = []
    progs = programs(objects)
    coordinators = by_component(progs, "coordinator")
    for c in coordinators:
        for flag, component in (("target", "target"), ("draft", "draft")):
            workers = by_component(progs, component)
            if flag not in c.flags:
                if workers:
                    errors.append(f"{c.where}: --{flag} is not set but a {component} workload exists")
                continue
            host, port = split_address(c.flags[flag])
            pod, _, service_name = host.partition(".")
            if not workers:
                errors.append(f"{c.where}: --{flag}={c.flags[flag]}: no {component} workload")
                continue
            worker = workers[0]
            expected_pod = f"{worker.workload['metadata']['name']}-0"
            if pod != expected_pod:
                errors.append(f"{c.where}: --{flag} names pod {pod!r}, "
                              f"but the {component} leader pod is {expected_pod!r}")
            if worker.workload["kind"] == "StatefulSet":
                sts_service = worker.workload["spec"].get("serviceName")
                if service_name != sts_service:
                    errors.append(f"{c.where}: --{flag} uses subdomain {service_name!r}, "
                                  f"but {obj_name(worker.workload)} has serviceName {sts_service!r}")
                service = headless_service_for(objects, service_name)
                if service is None or (service.get("spec") or {}).get("clusterIP") != "None":
                    errors.append(f"{c.where}: --{flag}: no headless Service {service_name!r}")
                    continue
                backend, why = service_backend_port(objects, service, port)
            else:  # LeaderWorkerSet: its controller makes the headless Service.
                if service_name != worker.workload["metadata"]["name"]:
                    errors.append(f"{c.where}: --{flag} uses subdomain {service_name!r}, not the "
                                  f"LeaderWorkerSet's {worker.workload['metadata']['name']!r}")
                backend, why = port, ""
            if backend is None:
                errors.append(f"{c.where}: --{flag}: {why}")
            elif backend != worker.port("listen"):
                errors.append(f"{c.where}: --{flag} reaches port {backend}, "
                              f"but {worker.where} listens on {worker.port('listen')}")
    for w in by_component(progs, "target"):
        if "rendezvous" not in w.flags:
            errors.append(f"{w.where}: --rendezvous is not set")
            continue
        host, port = split_address(w.flags["rendezvous"])
        service = headless_service_for(objects, host)
        if service is None:
            errors.append(f"{w.where}: --rendezvous={w.flags['rendezvous']}: no Service {host!r}")
            continue
        if not (service.get("spec") or {}).get("publishNotReadyAddresses"):
            errors.append(f"{obj_name(service)}: needs publishNotReadyAddresses (the coordinator "
                          "is Ready only after the group formed through it)")
        backend, why = service_backend_port(objects, service, port)
        rendezvous_ports = {c.port("rendezvous_listen") for c in coordinators}
        if backend is None:
            errors.append(f"{w.where}: --rendezvous: {why}")
        elif backend not in rendezvous_ports:
            errors.append(f"{w.where}: --rendezvous reaches port {backend}, but the coordinator "
                          f"serves the rendezvous on {sorted(p for p in rendezvous_ports if p)}")
    return errors


def env_sources(container: dict) -> Dict[str, Optional[str]]:
    """Env var -> its fieldRef path (None for plain values and other sources)."""
    out = {}
    for env in container.get("env") or []:
        field = ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        out[env["name"]] = field
    return out


def check_target_group(objects: List[dict], cluster: dict) -> List[str]:
    """tp_size == replicas (or LWS size) == the description's target.tp; rank, run id and
    hostname come from the pod's identity."""
    errors = []
    tp = (cluster.get("target") or {}).get("tp", 4)
    targets = by_component(programs(objects), "target")
    if not targets:
        return ["no target group workload"]
    for w in targets:
        kind, spec = w.workload["kind"], w.workload.get("spec") or {}
        if kind == "StatefulSet":
            size = spec.get("replicas", 1)
            if spec.get("podManagementPolicy") != "Parallel":
                errors.append(f"{w.where}: podManagementPolicy must be Parallel (ranks start together)")
            if (spec.get("updateStrategy") or {}).get("type") != "OnDelete":
                errors.append(f"{w.where}: updateStrategy must be OnDelete (a group forms from one revision)")
        elif kind == "LeaderWorkerSet":
            size = (spec.get("leaderWorkerTemplate") or {}).get("size", 1)
            if spec.get("replicas", 1) != 1:
                errors.append(f"{w.where}: replicas must be 1 (the coordinator drives one group)")
        else:
            errors.append(f"{w.where}: a target group must be a StatefulSet or LeaderWorkerSet")
            continue
        tp_flag = w.flags.get("tp_size")
        if str(size) != tp_flag or size != tp:
            errors.append(f"{w.where}: group size {size}, --tp_size={tp_flag} and the cluster "
                          f"description's target.tp {tp} must be equal")
        env = env_sources(w.container)
        for flag, want in (("rank", f"metadata.labels['{RANK_LABELS.get(kind)}']"),
                           ("run_id", f"metadata.labels['{RUN_ID_LABELS.get(kind)}']"),
                           ("hostname", "status.podIP")):
            m = re.fullmatch(r"\$\((\w+)\)", w.flags.get(flag, ""))
            if not m:
                errors.append(f"{w.where}: --{flag} must be $(VAR) from the downward API, "
                              f"not {w.flags.get(flag)!r}")
            elif env.get(m.group(1)) != want:
                errors.append(f"{w.where}: --{flag} uses ${m.group(1)}, which must come from "
                              f"{want} (it is {env.get(m.group(1))!r})")
    return errors


def check_env_references(objects: List[dict]) -> List[str]:
    """Every $(VAR) in args is an env var of the container (else Kubernetes passes it
    through literally)."""
    errors = []
    for p in programs(objects):
        defined = set(env_sources(p.container))
        for arg in p.container.get("args") or []:
            for var in re.findall(r"\$\((\w+)\)", arg):
                if var not in defined:
                    errors.append(f"{p.where}: {arg!r} refers to undefined env var {var}")
    return errors


def check_volume_references(objects: List[dict]) -> List[str]:
    """ConfigMaps, Secrets-free: every ConfigMap and PVC a pod mounts is in the render,
    and every volumeMount names a volume."""
    errors = []
    config_maps = {o["metadata"]["name"] for o in of_kind(objects, "ConfigMap")}
    claims = {o["metadata"]["name"] for o in of_kind(objects, "PersistentVolumeClaim")}
    for obj in objects:
        for template in pod_templates(obj):
            spec = template.get("spec") or {}
            volumes = {v["name"]: v for v in spec.get("volumes") or []}
            for v in volumes.values():
                if "configMap" in v and v["configMap"].get("name") not in config_maps:
                    errors.append(f"{obj_name(obj)}: volume {v['name']} uses ConfigMap "
                                  f"{v['configMap'].get('name')!r}, which is not rendered")
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim is not None and claim not in claims:
                    errors.append(f"{obj_name(obj)}: volume {v['name']} uses claim {claim!r}, "
                                  "which is not rendered")
            for c in spec.get("containers") or []:
                for m in c.get("volumeMounts") or []:
                    if m["name"] not in volumes:
                        errors.append(f"{obj_name(obj)}: mount {m['mountPath']} names no volume")
    return errors


def cluster_description(objects: List[dict], name_prefix: str = "tandem-cluster") -> Tuple[Optional[dict], List[str]]:
    maps = [o for o in of_kind(objects, "ConfigMap")
            if o["metadata"]["name"].startswith(name_prefix)]
    if len(maps) != 1:
        return None, [f"expected one ConfigMap {name_prefix}-*, found {len(maps)}"]
    data = maps[0].get("data") or {}
    if "cluster.json" not in data:
        return None, [f"{obj_name(maps[0])}: no cluster.json key"]
    try:
        return json.loads(data["cluster.json"]), []
    except json.JSONDecodeError as e:
        return None, [f"{obj_name(maps[0])}: cluster.json: {e}"]


def parse_dry_run(text: str) -> Dict[str, List[Tuple[str, str]]]:
    """`tandem up --dry-run` process lines -> process name -> flags (in order)."""
    out, in_processes = {}, False
    for line in text.splitlines():
        if line.startswith("# processes"):
            in_processes = True
            continue
        if not in_processes or ":" not in line or line.startswith("#"):
            continue
        name, _, command = line.partition(": ")
        tokens = shlex.split(command)
        if ">" in tokens:
            tokens = tokens[:tokens.index(">")]
        out[name] = [(m.group(1), m.group(2)) for m in
                     (re.fullmatch(r"--([A-Za-z0-9_]+)=(.*)", t, re.S) for t in tokens[1:]) if m]
    return out


def check_matches_description(objects: List[dict], dry_run: Dict[str, List[Tuple[str, str]]]) -> List[str]:
    """The container flags say what the cluster description says: every flag of the
    process `tandem up` would start for it has the same value in the manifest and back,
    apart from addresses and per-pod identities (checked by check_addresses and
    check_target_group)."""
    errors = []
    progs = programs(objects)
    pairs = [("coordinator", "coordinator", "coordinator"), ("target-0", "target", "worker"),
             ("draft", "draft", "worker")]
    for process, component, program in pairs:
        found = by_component(progs, component)
        if process not in dry_run:
            if found:
                errors.append(f"{found[0].where}: the cluster description has no {process}")
            continue
        if not found:
            errors.append(f"the cluster description has a {process}, the manifests no {component}")
            continue
        skip = ADDRESS_FLAGS[program]
        want = {k: v for k, v in dict(dry_run[process]).items() if k not in skip}
        for w in found:
            have = {k: v for k, v in w.flags.items() if k not in skip}
            for k in sorted(set(want) | set(have)):
                if want.get(k) != have.get(k):
                    errors.append(f"{w.where}: --{k} is {have.get(k)!r} in the manifest but "
                                  f"{want.get(k)!r} from the cluster description")
    return errors


def check_model_paths(objects: List[dict], image_models: Set[str], volume_dirs: Set[str]) -> List[str]:
    """--model_dir/--tokenizer name a model baked into the image (only with the CPU
    image) or a documented directory of the read-only models volume."""
    errors = []
    claims = {o["metadata"]["name"] for o in of_kind(objects, "PersistentVolumeClaim")}
    for p in programs(objects):
        for flag in ("model_dir", "tokenizer"):
            path = p.flags.get(flag)
            if path is None:
                continue
            if path.startswith(IMAGE_MODELS_ROOT + "/"):
                name = path[len(IMAGE_MODELS_ROOT) + 1:].strip("/")
                if name not in image_models:
                    errors.append(f"{p.where}: --{flag}={path}: the image bakes in only "
                                  f"{sorted(image_models)}")
                if not str(p.container.get("image", "")).endswith(":cpu"):
                    errors.append(f"{p.where}: --{flag}={path} is baked into the CPU image only, "
                                  f"but the container runs {p.container.get('image')!r}")
                continue
            volumes = {v["name"]: v for v in (p.template.get("spec") or {}).get("volumes") or []}
            mount = next((m for m in p.container.get("volumeMounts") or []
                          if path.startswith(m["mountPath"].rstrip("/") + "/")), None)
            if mount is None:
                errors.append(f"{p.where}: --{flag}={path} is on no mounted volume")
                continue
            claim = volumes.get(mount["name"], {}).get("persistentVolumeClaim")
            if not claim or claim.get("claimName") not in claims:
                errors.append(f"{p.where}: --{flag}={path}: {mount['mountPath']} is not the models claim")
                continue
            if not mount.get("readOnly") or not claim.get("readOnly"):
                errors.append(f"{p.where}: the models volume must be mounted read-only")
            rel = path[len(mount["mountPath"].rstrip("/")) + 1:].strip("/")
            if rel not in volume_dirs:
                errors.append(f"{p.where}: --{flag}={path}: {rel!r} is not in the documented "
                              f"models volume layout {sorted(volume_dirs)}")
    return errors


def check_network_policy(objects: List[dict]) -> List[str]:
    """Worker ports only from the coordinator (and target ranks among themselves); the
    rendezvous port only from target ranks."""
    errors = []
    policies = of_kind(objects, "NetworkPolicy")
    progs = programs(objects)

    def rules_for(labels: dict) -> List[dict]:
        rules = []
        for pol in policies:
            if selects(pol["spec"].get("podSelector") or {}, labels):
                rules += pol["spec"].get("ingress") or []
        return rules

    def allowed_sources(labels: dict, port: int) -> List[Optional[str]]:
        """Components allowed to reach `port` (None = anyone)."""
        sources = []
        for rule in rules_for(labels):
            ports = [p.get("port") for p in rule.get("ports") or []]
            if ports and port not in ports:
                continue
            peers = rule.get("from")
            if not peers:
                sources.append(None)
                continue
            for peer in peers:
                sel = (peer.get("podSelector") or {}).get("matchLabels") or {}
                sources.append(sel.get(COMPONENT) if "namespaceSelector" not in peer else None)
        return sources

    for p in progs:
        if p.program not in ("coordinator", "worker"):
            continue
        labels = template_labels(p.template)
        if not rules_for(labels):
            errors.append(f"{p.where}: no NetworkPolicy selects these pods")
            continue
        if p.program == "worker":
            allowed = {"coordinator", "target"} if p.component == "target" else {"coordinator"}
            port = p.port("listen")
        else:
            allowed, port = {"target"}, p.port("rendezvous_listen")
        for source in allowed_sources(labels, port):
            if source not in allowed:
                errors.append(f"{p.where}: port {port} is open to "
                              f"{'anyone' if source is None else repr(source)}; only {sorted(allowed)} may reach it")
    return errors


def check_disruption_budget(objects: List[dict]) -> List[str]:
    targets = by_component(programs(objects), "target")
    pdbs = of_kind(objects, "PodDisruptionBudget")
    for w in targets:
        if not any(selects(p["spec"].get("selector") or {}, template_labels(w.template)) for p in pdbs):
            return [f"{w.where}: no PodDisruptionBudget covers the target group"]
    return []


def check_security(objects: List[dict], image_uid: int) -> List[str]:
    """Non-root as the image's user, read-only root filesystem, graceful termination."""
    errors = []
    for p in programs(objects):
        pod = (p.template.get("spec") or {})
        ctx = pod.get("securityContext") or {}
        if not ctx.get("runAsNonRoot") or ctx.get("runAsUser") != image_uid:
            errors.append(f"{p.where}: must run as non-root user {image_uid} (the image's)")
        csec = p.container.get("securityContext") or {}
        if not csec.get("readOnlyRootFilesystem") or csec.get("allowPrivilegeEscalation", True):
            errors.append(f"{p.where}: needs readOnlyRootFilesystem and no privilege escalation")
        if p.program in ("coordinator", "worker") and pod.get("terminationGracePeriodSeconds", 30) < 30:
            errors.append(f"{p.where}: terminationGracePeriodSeconds under 30 s cuts the drain short")
    return errors
