"""Facts the manifest checks compare against: the binaries' flags, the cluster plan
`tandem up --dry-run` derives from a description, what the Dockerfile bakes into the
image, the documented models-volume layout, and the rendered overlays themselves."""

import os
import re
import shlex
import subprocess
from typing import Dict, List, Optional, Set, Tuple

import yaml

KUBECTL = "/usr/bin/kubectl"


def _run(argv: List[str], timeout: float = 60) -> str:
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    return proc.stdout


def absl_flags(binary: str) -> Set[str]:
    """Flags an absl-flags binary accepts, from --helpfull ("  --name (help...)")."""
    text = _run([binary, "--helpfull"])
    flags = set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", text, re.M))
    if not flags:
        raise RuntimeError(f"{binary} --helpfull listed no flags:\n{text[:2000]}")
    return flags


def cli_flags(tandem: str, command: str) -> Set[str]:
    """Flags of `tandem COMMAND`, from its --help ("  --name=VALUE" or "  --name"), with
    dashes written as underscores (the CLI takes both)."""
    text = _run([tandem, command, "--help"])
    flags = {f.replace("-", "_") for f in re.findall(r"^\s+--([A-Za-z0-9_-]+)(?:=|\s*$)", text, re.M)}
    if not flags:
        raise RuntimeError(f"tandem {command} --help listed no flags:\n{text[:2000]}")
    return flags


def program_flags(coordinator: str, worker: str, tandem: str) -> Dict[str, Set[str]]:
    return {
        "coordinator": absl_flags(coordinator),
        "worker": absl_flags(worker),
        "tandem bench": cli_flags(tandem, "bench"),
        "tandem generate": cli_flags(tandem, "generate"),
    }


def dry_run(tandem: str, cluster_json: str, log_dir: str) -> str:
    """`tandem up --config FILE --dry-run` (fails with its message when the description
    is not valid for the CLI)."""
    proc = subprocess.run([tandem, "up", "--config", cluster_json, "--dry-run",
                           "--log-dir", log_dir],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"tandem up --config {cluster_json} --dry-run failed "
                           f"(exit {proc.returncode}):\n{proc.stdout}")
    return proc.stdout


# ---- Dockerfile ---------------------------------------------------------------------

def dockerfile_instructions(text: str) -> List[Tuple[str, str, int]]:
    """(INSTRUCTION, arguments, line) with continuation lines joined, comments dropped."""
    out, buf, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue  # Comment inside a continued instruction.
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip(), start))
        buf = ""
    if buf:
        raise ValueError(f"Dockerfile: instruction at line {start} ends with a continuation")
    return out


def copy_sources(instructions) -> List[Tuple[str, int]]:
    """Build-context sources of COPY/ADD (not --from=stage copies)."""
    out = []
    for word, rest, line in instructions:
        if word not in ("COPY", "ADD"):
            continue
        if rest.startswith("["):
            import json
            parts = json.loads(rest)
        else:
            parts = shlex.split(rest)
        options = [p for p in parts if p.startswith("--")]
        if any(o.startswith("--from=") for o in options):
            continue
        paths = [p for p in parts if not p.startswith("--")]
        out += [(src, line) for src in paths[:-1]]
    return out


def image_models(instructions) -> Set[str]:
    """Models the image bakes in: `cp -r models/A models/B /opt/tandem/models/`."""
    names = set()
    for word, rest, _ in instructions:
        if word != "RUN":
            continue
        for m in re.finditer(r"cp -r ((?:models/[\w.-]+ )+)/opt/tandem/models/?", rest):
            names |= {p.split("/", 1)[1] for p in m.group(1).split()}
    return names


def image_uid(instructions) -> Optional[int]:
    users = [rest for word, rest, _ in instructions if word == "USER"]
    if not users:
        return None
    uid = users[-1].split(":")[0]
    return int(uid) if uid.isdigit() else None


def exposed_ports(instructions) -> Set[int]:
    ports = set()
    for word, rest, _ in instructions:
        if word == "EXPOSE":
            ports |= {int(p.split("/")[0]) for p in rest.split()}
    return ports


# ---- README and rendering -------------------------------------------------------------

def volume_layout(readme_text: str) -> Set[str]:
    """Directories of the models volume, from the README's "Models volume" section:
    every `/models/NAME/` mentioned there."""
    m = re.search(r"^## Models volume\n(.*?)(?=^## )", readme_text, re.S | re.M)
    if not m:
        raise ValueError("README has no '## Models volume' section")
    return set(re.findall(r"`/models/([\w.-]+)/`", m.group(1)))


def have_kubectl() -> bool:
    return os.access(KUBECTL, os.X_OK)


def render(kustomization_dir: str) -> List[dict]:
    proc = subprocess.run([KUBECTL, "kustomize", kustomization_dir], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {kustomization_dir} failed:\n{proc.stderr}")
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
