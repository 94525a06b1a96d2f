"""Renders every kustomization under deploy/ with `kubectl kustomize`, validates the
objects against the Kubernetes API schema (strict), and checks the invariants that tie
them to the binaries (manifest_checks.py): flags the binaries accept, ports, probes,
Service wiring, tp size, the cluster description, model paths, network policy, PDB and
security settings.

Run by `bazel test //deploy:manifests_test`; standalone:
  /usr/bin/python3 deploy/validate/manifests_test.py --bin-dir bazel-bin
"""

import argparse
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import k8s_schema_check  # noqa: E402
import manifest_checks as mc  # noqa: E402
import repo_facts  # noqa: E402

DEPLOY = os.path.dirname(HERE)
BIN_DIR = None  # Set in main().

# Kustomizations that deploy a Tandem cluster (every overlay, and the base itself).
CLUSTERS = ["base"] + sorted("overlays/" + d for d in os.listdir(os.path.join(DEPLOY, "overlays")))


def binary(path: str) -> str:
    return os.path.join(BIN_DIR, path)


class Facts:
    """Computed once: binaries' flags, schema, Dockerfile and README facts."""
    schemas = None
    flags = None
    dockerfile = None
    readme_dirs = None


def setUpModule():
    Facts.schemas = k8s_schema_check.SchemaSet(
        [os.path.join(HERE, "k8s_schema.json"), os.path.join(HERE, "lws_schema.json")])
    Facts.flags = repo_facts.program_flags(binary("coordinator/tandem-coordinator"),
                                           binary("worker/tandem-worker"),
                                           binary("client/tandem"))
    with open(os.path.join(DEPLOY, "docker", "Dockerfile"), encoding="utf-8") as f:
        Facts.dockerfile = repo_facts.dockerfile_instructions(f.read())
    with open(os.path.join(DEPLOY, "README.md"), encoding="utf-8") as f:
        Facts.readme_dirs = repo_facts.volume_layout(f.read())


@unittest.skipUnless(repo_facts.have_kubectl(),
                     f"{repo_facts.KUBECTL} is not installed: cannot render the kustomizations")
class RenderedManifestsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # kustomize refuses files reached through symlinks that leave the kustomization
        # root (Bazel runfiles are symlinks), so render from a real copy.
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.deploy = os.path.join(cls.tmp, "deploy")
        shutil.copytree(DEPLOY, cls.deploy, symlinks=False)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def render(self, rel: str):
        return repo_facts.render(os.path.join(self.deploy, rel))

    def assertNoErrors(self, errors, what):
        self.assertEqual(errors, [], f"{what}:\n  " + "\n  ".join(errors))

    def check_cluster(self, rel: str, objects):
        self.assertNoErrors([e for o in objects for e in Facts.schemas.validate(o, rel)],
                            f"{rel}: schema")
        cluster, errors = mc.cluster_description(objects)
        self.assertNoErrors(errors, f"{rel}: cluster description")
        path = os.path.join(self.tmp, rel.replace("/", "_") + "-cluster.json")
        with open(path, "w", encoding="utf-8") as f:
            import json
            json.dump(cluster, f)
        plan = mc.parse_dry_run(repo_facts.dry_run(binary("client/tandem"), path,
                                                   os.path.join(self.tmp, "logs")))
        self.assertIn("coordinator", plan, "tandem up --dry-run printed no coordinator")
        uid = repo_facts.image_uid(Facts.dockerfile)
        errors = (mc.check_flags_known(objects, Facts.flags)
                  + mc.check_ports_and_probes(objects)
                  + mc.check_services(objects)
                  + mc.check_addresses(objects)
                  + mc.check_target_group(objects, cluster)
                  + mc.check_env_references(objects)
                  + mc.check_volume_references(objects)
                  + mc.check_matches_description(objects, plan)
                  + mc.check_model_paths(objects, repo_facts.image_models(Facts.dockerfile),
                                         Facts.readme_dirs)
                  + mc.check_network_policy(objects)
                  + mc.check_disruption_budget(objects)
                  + mc.check_security(objects, uid))
        self.assertNoErrors(errors, rel)
        exposed = repo_facts.exposed_ports(Facts.dockerfile)
        for p in mc.programs(objects):
            for port in mc.container_ports(p.container).values():
                self.assertIn(port, exposed, f"{rel}: {p.where}: port {port} not EXPOSEd by the image")

    def test_clusters(self):
        self.assertGreaterEqual(len(CLUSTERS), 4)
        for rel in CLUSTERS:
            with self.subTest(kustomization=rel):
                objects = self.render(rel)
                kinds = {o["kind"] for o in objects}
                self.assertTrue({"Deployment", "Service", "ConfigMap", "NetworkPolicy",
                                 "PodDisruptionBudget"} <= kinds, f"{rel}: kinds {kinds}")
                self.check_cluster(rel, objects)
                print(f"{rel}: {len(objects)} objects valid, invariants hold")

    def test_overlay_specifics(self):
        tiny = self.render("overlays/cpu-tiny")
        for p in mc.programs(tiny):
            limits = ((p.container.get("resources") or {}).get("limits") or {})
            requests = ((p.container.get("resources") or {}).get("requests") or {})
            self.assertNotIn("nvidia.com/gpu", limits, p.where)
            self.assertNotIn("nvidia.com/gpu", requests, p.where)
            if p.program == "worker":
                self.assertEqual(p.flags["backend"], "cpu", p.where)
        self.assertEqual(mc.of_kind(tiny, "PersistentVolumeClaim"), [])
        for rel in ("overlays/gpu-70b", "overlays/lws"):
            objects = self.render(rel)
            workers = [p for p in mc.programs(objects) if p.program == "worker"]
            self.assertEqual({p.component for p in workers}, {"draft", "target"}, rel)
            for p in workers:
                self.assertEqual(p.flags["backend"], "cuda", p.where)
                self.assertEqual(p.container["resources"]["limits"].get("nvidia.com/gpu"), 1, p.where)
                spec = p.template["spec"]
                self.assertEqual(spec.get("nodeSelector"), {"nvidia.com/gpu.present": "true"}, p.where)
                self.assertTrue(any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations", [])),
                                p.where)
            target = [p for p in workers if p.component == "target"]
            self.assertEqual([p.flags["comm"] for p in target], ["nccl"], rel)
            env = {e["name"]: e.get("value") for e in target[0].container.get("env", [])}
            self.assertEqual(env.get("NCCL_SOCKET_IFNAME"), "eth0", rel)
        lws = self.render("overlays/lws")
        self.assertEqual([o["kind"] for o in lws if o["metadata"]["name"] == "tandem-target"
                          and o["kind"] in ("StatefulSet", "LeaderWorkerSet")], ["LeaderWorkerSet"])

    def test_tls_component_mounts_secret(self):
        # The TLS component on top of each overlay: renders, validates, mounts the Secret
        # read-only in every server pod.
        for overlay in ("overlays/cpu-tiny", "overlays/lws"):
            with self.subTest(overlay=overlay):
                root = os.path.join(self.tmp, "tls-" + overlay.replace("/", "-"))
                os.makedirs(root)
                with open(os.path.join(root, "kustomization.yaml"), "w", encoding="utf-8") as f:
                    f.write(f"resources:\n- {os.path.relpath(os.path.join(self.deploy, overlay), root)}\n"
                            f"components:\n- {os.path.relpath(os.path.join(self.deploy, 'components/tls'), root)}\n")
                objects = repo_facts.render(root)
                self.assertEqual([e for o in objects for e in Facts.schemas.validate(o)], [])
                servers = [p for p in mc.programs(objects) if p.program in ("coordinator", "worker")]
                self.assertEqual(len(servers), 3)
                for p in servers:
                    mounts = {m["mountPath"]: m for m in p.container["volumeMounts"]}
                    self.assertTrue(mounts.get("/etc/tandem/tls", {}).get("readOnly"), p.where)
                    vols = {v["name"]: v for v in p.template["spec"]["volumes"]}
                    self.assertEqual(vols["tls"]["secret"]["secretName"], "tandem-tls", p.where)

    def test_bench_job(self):
        objects = self.render("bench")
        self.assertEqual([o["kind"] for o in objects], ["Job"])
        self.assertEqual([e for o in objects for e in Facts.schemas.validate(o, "bench")], [])
        errors = (mc.check_flags_known(objects, Facts.flags)
                  + mc.check_security(objects, repo_facts.image_uid(Facts.dockerfile)))
        self.assertEqual(errors, [])
        bench = mc.programs(objects)
        self.assertEqual([p.program for p in bench], ["tandem bench"])
        # It talks to the coordinator Service of the clusters, on their ports.
        cluster = self.render("overlays/cpu-tiny")
        service = next(s for s in mc.of_kind(cluster, "Service") if s["metadata"]["name"] == "tandem")
        ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
        self.assertEqual(bench[0].flags["server"], f"tandem:{ports['grpc']}")
        self.assertEqual(bench[0].flags["metrics"], f"tandem:{ports['metrics']}")
        prompts = bench[0].flags["prompts"]
        self.assertTrue(prompts.startswith("/opt/tandem/bench/prompts/"), prompts)


def main():
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", help="directory with coordinator/, worker/, client/ binaries "
                        "(default: the Bazel runfiles)")
    args, rest = parser.parse_known_args()
    if args.bin_dir:
        BIN_DIR = args.bin_dir
    else:
        BIN_DIR = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
    if not repo_facts.have_kubectl():
        print(f"SKIPPED rendering checks: {repo_facts.KUBECTL} is not installed")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
