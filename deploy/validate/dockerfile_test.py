"""Lints deploy/docker/Dockerfile against the repository (no Docker engine needed):
every COPY source exists and survives .dockerignore, every repository path, Bazel label,
Bazel config and run.sh command its RUN steps use exists, the entry point it names is
installed, the user is a fixed non-root uid, and both stages are Debian 12.

It reads the source tree the Dockerfile lives in (found through the runfile's real
path), so the target is tagged local and external (never cached).
Standalone: /usr/bin/python3 deploy/validate/dockerfile_test.py
"""

import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import repo_facts  # noqa: E402

DOCKERFILE = os.path.realpath(os.path.join(os.path.dirname(HERE), "docker", "Dockerfile"))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(DOCKERFILE)))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def ignore_patterns():
    lines = read(".dockerignore").splitlines()
    return [l.strip() for l in lines if l.strip() and not l.strip().startswith("#")]


def pattern_regex(pattern):
    """A .dockerignore pattern as a regex: `*` and `?` stay within one path element,
    `**/` spans any number of directories."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out + r"\Z"


def ignored(rel, patterns):
    """Docker's rule, simplified: a path is excluded when it or a parent directory
    matches a pattern (`**` spans directories; `!` re-includes)."""
    parts = rel.strip("/").split("/")
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        regex = pattern_regex(pat)
        for i in range(1, len(parts) + 1):
            if re.match(regex, "/".join(parts[:i])):
                result = not negate
                break
    return result


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DOCKERFILE, encoding="utf-8") as f:
            cls.text = f.read()
        cls.ins = repo_facts.dockerfile_instructions(cls.text)
        cls.runs = " ".join(rest for word, rest, _ in cls.ins if word == "RUN")
        cls.patterns = ignore_patterns()

    def test_copy_sources_exist_and_are_not_ignored(self):
        sources = repo_facts.copy_sources(self.ins)
        self.assertIn(("run.sh", sources[0][1]), sources)
        for src, line in sources:
            with self.subTest(source=src):
                self.assertTrue(os.path.exists(os.path.join(ROOT, src)),
                                f"Dockerfile line {line}: COPY {src}: not in the repository")
                if src != ".":
                    self.assertFalse(ignored(src, self.patterns), f"{src} is in .dockerignore")

    def test_run_paths_exist_and_are_not_ignored(self):
        paths = set(re.findall(r"(?<![\w/])((?:deploy|models|bench)/[\w./-]+)", self.runs))
        self.assertTrue({"deploy/docker/collect_libs.sh", "deploy/docker/tandem-entrypoint.sh",
                         "models/target", "models/draft", "bench/prompts"} <= paths, paths)
        for rel in paths:
            with self.subTest(path=rel):
                self.assertTrue(os.path.exists(os.path.join(ROOT, rel)), f"RUN uses {rel}: missing")
                self.assertFalse(ignored(rel, self.patterns), f"{rel} is in .dockerignore")
        for script in ("deploy/docker/collect_libs.sh", "deploy/docker/tandem-entrypoint.sh", "run.sh"):
            self.assertTrue(os.access(os.path.join(ROOT, script), os.X_OK), f"{script} not executable")
        for model in repo_facts.image_models(self.ins):
            self.assertTrue(os.path.exists(os.path.join(ROOT, "models", model, "config.json")), model)

    def test_bazel_labels_and_configs_exist(self):
        labels = re.findall(r"//([\w/]+):([\w.-]+)", self.runs)
        self.assertEqual(sorted(labels), sorted([("coordinator", "tandem-coordinator"),
                                                 ("worker", "tandem-worker"), ("client", "tandem")]))
        for package, name in labels:
            build = read(f"{package}/BUILD")
            self.assertRegex(build, rf'name = "{re.escape(name)}"', f"//{package}:{name} not defined")
            self.assertIn(f"bazel-bin/{package}/{name}", self.runs)
        bazelrc = read(".bazelrc")
        configs = set(re.findall(r"\bconfig=(\w+)", self.runs))
        self.assertEqual(configs, {"cuda", "nocuda"})
        for config in configs:
            self.assertRegex(bazelrc, rf"(?m)^build:{config} ", f"--config={config} not in .bazelrc")
        self.assertIn("TANDEM_CUDA_ARCH", read("third_party/cuda/cuda_configure.bzl"))

    def test_run_sh_deps(self):
        self.assertIn("./run.sh deps", self.runs)
        self.assertRegex(read("run.sh"), r"(?m)^\s+deps\)\s+install_packages\s*;;")

    def test_entrypoint_user_ports_and_bases(self):
        entry = [rest for word, rest, _ in self.ins if word == "ENTRYPOINT"]
        self.assertEqual(entry, ['["/opt/tandem/bin/tandem-entrypoint"]'])
        self.assertIn("deploy/docker/tandem-entrypoint.sh /opt/tandem/bin/tandem-entrypoint", self.runs)
        uid = repo_facts.image_uid(self.ins)
        self.assertIsNotNone(uid, "USER must be a numeric uid (runAsNonRoot checks it)")
        self.assertGreater(uid, 0)
        self.assertIn(f"--uid {uid}", self.runs)
        self.assertTrue({50051, 50061, 50070, 9090} <= repo_facts.exposed_ports(self.ins))
        args = dict(re.findall(r"(?m)^ARG (\w+)=(\S+)", self.text))
        self.assertEqual(args.get("BUILD_IMAGE"), "debian:bookworm")
        self.assertEqual(args.get("RUNTIME_IMAGE"), "debian:bookworm-slim")
        froms = [rest for word, rest, _ in self.ins if word == "FROM"]
        self.assertEqual(froms, ["${BUILD_IMAGE} AS build", "${RUNTIME_IMAGE} AS runtime"])
        self.assertIn("Debian 12", read("run.sh"))

    def test_builds_without_buildkit_frontends(self):
        """The classic builder, offline: no `# syntax=` remote frontend and no
        BuildKit-only instruction forms."""
        self.assertNotRegex(self.text, r"(?im)^#\s*syntax\s*=")
        self.assertNotRegex(self.text, r"(?m)^\s*RUN\s+--mount")
        self.assertNotRegex(self.text, r"(?m)^\s*COPY\s+--link")
        self.assertNotRegex(self.text, r"<<\s*['\"]?[A-Z]+['\"]?\s*$")

    def test_prebuilt_and_source_install_the_same_programs(self):
        """Both ways of getting the programs (Bazel, or PREBUILT_BIN) copy the same three
        files, and the rest of the stage is shared."""
        args = dict(re.findall(r"(?m)^ARG (\w+)=(\S*)", self.text))
        self.assertEqual(args.get("PREBUILT_BIN"), "", "the default must build from source")
        for name in ("tandem-coordinator", "tandem-worker", "tandem"):
            self.assertIn(f'"$PREBUILT_BIN/{name}"', self.runs)

    def test_build_local_sets_only_dockerfile_args(self):
        """Every --build-arg build_local.sh passes is an ARG of the Dockerfile."""
        script = read("deploy/docker/build_local.sh")
        passed = set(re.findall(r"--build-arg (\w+)=", script))
        self.assertTrue({"PROFILE", "BUILD_IMAGE", "RUNTIME_IMAGE", "PREBUILT_BIN",
                         "PREBUILT_PACKAGES"} <= passed, passed)
        declared = set(re.findall(r"(?m)^ARG (\w+)", self.text))
        self.assertEqual(passed - declared, set())
        self.assertIn("DOCKER_BUILDKIT=0", script)
        self.assertIn("apt-get indextargets", script, "the mirror comes from apt's configuration")

    def test_ignore_matcher(self):
        pats = ["bazel-*", "**/node_modules", ".git", "!keep/.git"]
        self.assertTrue(ignored("bazel-bin/x", pats))
        self.assertTrue(ignored("a/b/node_modules/c", pats))
        self.assertTrue(ignored("node_modules", pats))
        self.assertFalse(ignored("models/target", pats))
        self.assertFalse(ignored("keep/.git", pats))


if __name__ == "__main__":
    unittest.main(verbosity=2)
