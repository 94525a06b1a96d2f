"""Unit tests of the deploy/ checkers: each check must fail when a port, flag, size or
path drifts (deliberate mutations of a correct rendering), the schema validator must
reject what the API server would, and the image helpers (entry point, library
collector, Dockerfile parser) must do what they say.

Run by `bazel test //deploy:validate_unit_test`; standalone:
  /usr/bin/python3 deploy/validate/validate_unit_test.py --bin-dir bazel-bin
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import k8s_schema_check  # noqa: E402
import manifest_checks as mc  # noqa: E402
import repo_facts  # noqa: E402

DEPLOY = os.path.dirname(HERE)
BIN_DIR = None


def binary(path):
    return os.path.join(BIN_DIR, path)


def schemas():
    return k8s_schema_check.SchemaSet([os.path.join(HERE, "k8s_schema.json"),
                                       os.path.join(HERE, "lws_schema.json")])


def service(name="svc", ports=None, selector=None):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": selector or {"app": "x"},
                     "ports": ports or [{"name": "grpc", "port": 50051, "targetPort": "grpc"}]}}


class SchemaCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.schemas = schemas()

    def errors(self, obj):
        return self.schemas.validate(obj)

    def test_valid_objects_pass(self):
        self.assertEqual(self.errors(service()), [])
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
              "data": {"a": "b"}}
        self.assertEqual(self.errors(cm), [])

    def test_unknown_field_is_an_error(self):
        s = service()
        s["spec"]["clusterIp"] = "None"  # clusterIP misspelt
        errs = self.errors(s)
        self.assertEqual(len(errs), 1)
        self.assertIn("/spec/clusterIp: unknown field", errs[0])

    def test_types_required_enum_int32_null(self):
        s = service(ports=[{"name": "grpc", "port": "50051"}])
        self.assertIn("/spec/ports/0/port: expected integer, got string", self.errors(s)[0])
        s = service(ports=[{"name": "grpc"}])
        self.assertIn("missing required field 'port'", self.errors(s)[0])
        s = service(ports=[{"port": 1, "protocol": "HTTP"}])
        self.assertIn("'HTTP' is not one of", self.errors(s)[0])
        s = service(ports=[{"port": 2**31}])
        self.assertIn("does not fit in int32", self.errors(s)[0])
        s = service(ports=[{"port": 1.5}])
        self.assertIn("expected integer, got number", self.errors(s)[0])
        s = service(ports=[{"port": 1, "targetPort": 1.5}])
        self.assertIn("expected string or integer", self.errors(s)[0])
        s = service()
        s["spec"]["type"] = None
        self.assertIn("null is not allowed", self.errors(s)[0])
        self.assertIn("no schema for apiVersion/kind apps/v2/Deployment",
                      self.errors({"apiVersion": "apps/v2", "kind": "Deployment", "metadata": {}})[0])

    def test_nested_pod_spec_and_lws(self):
        lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
               "metadata": {"name": "g"},
               "spec": {"leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {
                   "containers": [{"name": "w", "image": "i",
                                   "readinessProbe": {"grpc": {"port": 50061}}}]}}}}}
        self.assertEqual(self.errors(lws), [])
        bad = copy.deepcopy(lws)
        bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "readinessProbe"]["grpc"]["prot"] = 1
        errs = self.errors(bad)
        self.assertEqual(len(errs), 1)
        self.assertIn("/readinessProbe/grpc/prot: unknown field", errs[0])
        self.assertIn("missing required field 'port'", self.errors(bad)[0] + "".join(
            self.errors({**bad, "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {
                "containers": [{"name": "w", "readinessProbe": {"grpc": {}}}]}}}}})))
        bad = copy.deepcopy(lws)
        bad["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"
        self.assertIn("'Always' is not one of", self.errors(bad)[0])

    def test_schema_refs_resolve(self):
        # Every $ref of both files points to a definition (SchemaSet checks at load).
        self.assertGreater(len(self.schemas.definitions), 150)
        for kind in ("apps/v1/StatefulSet", "apps/v1/Deployment", "v1/Service", "batch/v1/Job",
                     "networking.k8s.io/v1/NetworkPolicy", "policy/v1/PodDisruptionBudget",
                     "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet"):
            self.assertIn(kind, self.schemas.kinds)


@unittest.skipUnless(repo_facts.have_kubectl(), f"{repo_facts.KUBECTL} is not installed")
class MutationTest(unittest.TestCase):
    """A correct rendering passes every check; each mutation fails the check meant for it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        deploy = os.path.join(cls.tmp, "deploy")
        shutil.copytree(DEPLOY, deploy, symlinks=False)
        cls.tiny = repo_facts.render(os.path.join(deploy, "overlays/cpu-tiny"))
        cls.gpu = repo_facts.render(os.path.join(deploy, "overlays/gpu-70b"))
        cls.lws = repo_facts.render(os.path.join(deploy, "overlays/lws"))
        cls.flags = repo_facts.program_flags(binary("coordinator/tandem-coordinator"),
                                             binary("worker/tandem-worker"),
                                             binary("client/tandem"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def dry_run(self, objects):
        cluster, errors = mc.cluster_description(objects)
        self.assertEqual(errors, [])
        path = os.path.join(self.tmp, "cluster.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cluster, f)
        return cluster, mc.parse_dry_run(repo_facts.dry_run(binary("client/tandem"), path,
                                                            os.path.join(self.tmp, "logs")))

    def all_errors(self, objects):
        cluster, plan = self.dry_run(objects)
        return (mc.check_flags_known(objects, self.flags) + mc.check_ports_and_probes(objects)
                + mc.check_services(objects) + mc.check_addresses(objects)
                + mc.check_target_group(objects, cluster) + mc.check_env_references(objects)
                + mc.check_volume_references(objects) + mc.check_matches_description(objects, plan)
                + mc.check_model_paths(objects, {"target", "draft"},
                                       {"target", "draft", "llama-2-70b", "llama-2-7b"})
                + mc.check_network_policy(objects) + mc.check_disruption_budget(objects)
                + mc.check_security(objects, 10001))

    def find(self, objects, kind, name):
        return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)

    def container(self, objects, kind, name):
        obj = self.find(objects, kind, name)
        return mc.pod_templates(obj)[0]["spec"]["containers"][0]

    def set_flag(self, container, name, value):
        args = container["args"]
        for i, a in enumerate(args):
            if a.startswith(f"--{name}="):
                args[i] = f"--{name}={value}"
                return
        raise AssertionError(f"no --{name}")

    def mutated(self, base, mutate):
        objects = copy.deepcopy(base)
        mutate(objects)
        return objects

    def assertCaught(self, base, mutate, expected):
        errors = self.all_errors(self.mutated(base, mutate))
        self.assertTrue(any(expected in e for e in errors),
                        f"mutation not caught: expected {expected!r} in\n  " + "\n  ".join(errors))

    def test_correct_renderings_pass(self):
        for objects in (self.tiny, self.gpu, self.lws):
            self.assertEqual(self.all_errors(objects), [])

    def test_port_drift(self):
        coord = ("Deployment", "tandem-coordinator")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *coord), "listen",
                                                             "0.0.0.0:50052"),
                          "containerPort 'grpc' is 50051, but --listen listens on 50052")
        self.assertCaught(self.tiny, lambda o: self.container(o, "StatefulSet", "tandem-target")
                          ["ports"][0].update(containerPort=50062),
                          "containerPort 'grpc' is 50062, but --listen listens on 50061")
        self.assertCaught(self.tiny, lambda o: self.container(o, *coord)["readinessProbe"]["grpc"]
                          .update(port=9090), "readinessProbe probes port 9090, which serves no gRPC")
        self.assertCaught(self.tiny, lambda o: self.container(o, "StatefulSet", "tandem-draft")
                          ["livenessProbe"]["grpc"].update(port=50071), "livenessProbe probes port 50071")
        self.assertCaught(self.tiny, lambda o: self.find(o, "Service", "tandem")["spec"]["ports"][0]
                          .update(targetPort="grcp"), "targetPort 'grcp' is not a port")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *coord), "metrics_listen",
                                                             "0.0.0.0:9091"),
                          "prometheus.io/port 9090 is not the --metrics_listen port 9091")
        self.assertCaught(self.tiny, lambda o: self.find(o, "Service", "tandem-rendezvous")["spec"]
                          ["ports"][0].update(port=50071), "has no port 50070")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *coord), "rendezvous_listen",
                                                             "0.0.0.0:50072"),
                          "'rendezvous' is 50070, but --rendezvous_listen listens on 50072")

    def test_flag_drift(self):
        target = ("StatefulSet", "tandem-target")
        self.assertCaught(self.tiny, lambda o: self.container(o, *target)["args"]
                          .append("--kv_cache_mib=64"), "worker has no flag --kv_cache_mib")
        self.assertCaught(self.tiny, lambda o: self.container(o, *target)["args"]
                          .append("--threads"), "is not of the form --name=value")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *target), "kv_cache_mb", "65"),
                          "--kv_cache_mb is '65' in the manifest but '64' from the cluster description")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, "Deployment", "tandem-coordinator"),
                                                             "tokenizer", "/opt/tandem/models/draft"),
                          "--tokenizer is '/opt/tandem/models/draft' in the manifest")

    def test_description_drift(self):
        def edit(objects):
            cm = next(o for o in objects if o["kind"] == "ConfigMap")
            cluster = json.loads(cm["data"]["cluster.json"])
            cluster["coordinator"]["max_k"] = 4
            cm["data"]["cluster.json"] = json.dumps(cluster)
        self.assertCaught(self.tiny, edit, "--max_k is '8' in the manifest but '4' from the cluster description")

    def test_tp_size_drift(self):
        target = ("StatefulSet", "tandem-target")
        self.assertCaught(self.tiny, lambda o: self.find(o, *target)["spec"].update(replicas=3),
                          "group size 3, --tp_size=4")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *target), "tp_size", "2"),
                          "--tp_size=2")
        self.assertCaught(self.lws, lambda o: self.find(o, "LeaderWorkerSet", "tandem-target")["spec"]
                          ["leaderWorkerTemplate"].update(size=8), "group size 8")
        self.assertCaught(self.tiny, lambda o: self.find(o, *target)["spec"].update(
            podManagementPolicy="OrderedReady"), "podManagementPolicy must be Parallel")

    def test_identity_drift(self):
        target = ("StatefulSet", "tandem-target")

        def rank_from_wrong_label(objects):
            env = self.container(objects, *target)["env"]
            env[0]["valueFrom"]["fieldRef"]["fieldPath"] = "metadata.name"
        self.assertCaught(self.tiny, rank_from_wrong_label, "--rank uses $TANDEM_RANK, which must come from")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *target), "hostname",
                                                             "$(MY_IP)"), "refers to undefined env var MY_IP")
        self.assertCaught(self.lws, lambda o: mc.pod_templates(self.find(o, "LeaderWorkerSet", "tandem-target"))
                          [0]["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"].update(
                              fieldPath="metadata.labels['apps.kubernetes.io/pod-index']"),
                          "leaderworkerset.sigs.k8s.io/worker-index")

    def test_address_drift(self):
        coord = ("Deployment", "tandem-coordinator")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *coord), "target",
                                                             "tandem-target-1.tandem-target:50061"),
                          "names pod 'tandem-target-1'")
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, *coord), "draft",
                                                             "tandem-draft-0.tandem-draft:50062"),
                          "has no port 50062")
        self.assertCaught(self.tiny, lambda o: self.find(o, "Service", "tandem-rendezvous")["spec"]
                          .pop("publishNotReadyAddresses"), "needs publishNotReadyAddresses")

    def test_model_path_drift(self):
        self.assertCaught(self.tiny, lambda o: self.set_flag(self.container(o, "StatefulSet", "tandem-draft"),
                                                             "model_dir", "/opt/tandem/models/big"),
                          "the image bakes in only")
        self.assertCaught(self.gpu, lambda o: self.set_flag(self.container(o, "StatefulSet", "tandem-draft"),
                                                            "model_dir", "/models/llama-3-8b"),
                          "'llama-3-8b' is not in the documented models volume layout")
        self.assertCaught(self.gpu, lambda o: self.set_flag(self.container(o, "StatefulSet", "tandem-draft"),
                                                            "model_dir", "/data/llama-2-7b"),
                          "is on no mounted volume")

        def writable(objects):
            for m in self.container(objects, "StatefulSet", "tandem-target")["volumeMounts"]:
                if m["mountPath"] == "/models":
                    m["readOnly"] = False
        self.assertCaught(self.gpu, writable, "must be mounted read-only")

    def test_policy_drift(self):
        def open_worker_api(objects):
            self.find(objects, "NetworkPolicy", "tandem-worker-api")["spec"]["ingress"][0].pop("from")
        self.assertCaught(self.tiny, open_worker_api, "port 50061 is open to anyone")
        self.assertCaught(self.tiny, lambda o: o.remove(self.find(o, "PodDisruptionBudget", "tandem-target")),
                          "no PodDisruptionBudget covers the target group")
        self.assertCaught(self.tiny, lambda o: mc.pod_templates(self.find(o, "Deployment", "tandem-coordinator"))
                          [0]["spec"]["securityContext"].update(runAsUser=0), "must run as non-root user 10001")
        self.assertCaught(self.tiny, lambda o: mc.pod_templates(self.find(o, "StatefulSet", "tandem-draft"))
                          [0]["spec"]["volumes"][0]["configMap"].update(name="tandem-cluster"),
                          "uses ConfigMap 'tandem-cluster', which is not rendered")


class DockerfileParseTest(unittest.TestCase):
    TEXT = """# comment
ARG BASE=debian:bookworm
FROM ${BASE} AS build
COPY run.sh ./
RUN a && \\
    # inner comment
    cp -r models/target models/draft /opt/tandem/models/
COPY --from=build /opt/tandem /opt/tandem
COPY ["deploy/x.sh", "bench/prompts", "/dst/"]
USER 10001:10001
EXPOSE 50051 9090/tcp
"""

    def test_parse(self):
        ins = repo_facts.dockerfile_instructions(self.TEXT)
        self.assertEqual([w for w, _, _ in ins], ["ARG", "FROM", "COPY", "RUN", "COPY", "COPY", "USER", "EXPOSE"])
        self.assertEqual(ins[3][2], 5)
        self.assertEqual(repo_facts.copy_sources(ins), [("run.sh", 4), ("deploy/x.sh", 9), ("bench/prompts", 9)])
        self.assertEqual(repo_facts.image_models(ins), {"target", "draft"})
        self.assertEqual(repo_facts.image_uid(ins), 10001)
        self.assertEqual(repo_facts.exposed_ports(ins), {50051, 9090})
        with self.assertRaises(ValueError):
            repo_facts.dockerfile_instructions("RUN a \\\n")

    def test_volume_layout(self):
        text = "## Models volume\n| `/models/a/` | x |\n`/models/b-1.5/`\n## Next\n`/models/c/`\n"
        self.assertEqual(repo_facts.volume_layout(text), {"a", "b-1.5"})
        with self.assertRaises(ValueError):
            repo_facts.volume_layout("## Other\n")


class ImageHelpersTest(unittest.TestCase):
    """The entry point and the library collector, run for real."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.entry = os.path.join(DEPLOY, "docker", "tandem-entrypoint.sh")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_entry(self, *args):
        home = os.path.join(self.tmp, "home")
        os.makedirs(os.path.join(home, "bin"), exist_ok=True)
        for rel, name in (("coordinator/tandem-coordinator", "tandem-coordinator"),
                          ("worker/tandem-worker", "tandem-worker"), ("client/tandem", "tandem")):
            link = os.path.join(home, "bin", name)
            if not os.path.exists(link):
                os.symlink(os.path.abspath(binary(rel)), link)
        env = dict(os.environ, TANDEM_HOME=home)
        return subprocess.run(["/bin/sh", self.entry, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env, timeout=60)

    def test_entrypoint_dispatches(self):
        r = self.run_entry("worker", "--helpfull")
        self.assertIn("--tp_size", r.stdout)
        r = self.run_entry("tandem-coordinator", "--helpfull")
        self.assertIn("--rendezvous_listen", r.stdout)
        r = self.run_entry("tandem", "bench", "--help")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("--server=HOST:PORT", r.stdout)
        r = self.run_entry("worker", "--role=nope")  # The program's own exit code passes through.
        self.assertEqual(r.returncode, 2, r.stdout)
        r = self.run_entry("scheduler")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown program 'scheduler'", r.stdout)
        r = self.run_entry()
        self.assertEqual(r.returncode, 2)
        self.assertIn("tandem-entrypoint coordinator", r.stdout)

    def test_collect_libs(self):
        dest = os.path.join(self.tmp, "lib")
        script = os.path.join(DEPLOY, "docker", "collect_libs.sh")
        r = subprocess.run(["/bin/sh", script, dest, binary("coordinator/tandem-coordinator"),
                            binary("worker/tandem-worker")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout)
        copied = set(os.listdir(dest))
        ldd = subprocess.run(["ldd", binary("worker/tandem-worker")], stdout=subprocess.PIPE,
                             text=True).stdout
        needed = {line.split()[0] for line in ldd.splitlines() if "=>" in line}
        glibc = {n for n in needed if n.split(".so")[0] in ("libc", "libm", "libdl", "libpthread", "librt")}
        self.assertTrue(glibc, ldd)
        self.assertEqual(copied & glibc, set())
        self.assertEqual(needed - glibc - copied, set())  # Everything else was copied.
        self.assertTrue(any(n.startswith("libgrpc++") for n in copied), copied)
        for name in copied:
            self.assertFalse(os.path.islink(os.path.join(dest, name)), name)
        self.assertEqual(len(r.stdout.splitlines()), len(copied))
        r = subprocess.run(["/bin/sh", script, dest], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 2)


def main():
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir")
    args, rest = parser.parse_known_args()
    BIN_DIR = args.bin_dir or os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
