"""Repository rule that finds the CUDA toolkit and defines `cuda_library`.

Environment (set through --repo_env, see .bazelrc):
  TANDEM_CUDA   auto (default): use nvcc if found; on: fail without nvcc; off: never.
  CUDA_PATH     toolkit root, default /usr/local/cuda.
  TANDEM_CUDA_ARCH  nvcc -arch value, default sm_90.

The generated repository exports:
  @local_cuda//:defs.bzl   CUDA_ENABLED (bool) and cuda_library(name, srcs, hdrs, deps, copts)
  @local_cuda//:cuda_runtime  cudart + cuBLAS(Lt) + NCCL link flags and headers (empty when off)
"""

_BUILD_ON = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**"], exclude_directories = 1),
    includes = ["include"],
)

cc_library(
    name = "cuda_runtime",
    linkopts = [
        "-L{root}/lib64",
        "-Wl,-rpath,{root}/lib64",
        "-lcublasLt",
        "-lcublas",
        "-lnccl",
        "-lcudart",
        "-ldl",
        "-lpthread",
    ],
    deps = [":cuda_headers"],
)
"""

_BUILD_OFF = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda_headers")

cc_library(name = "cuda_runtime")
"""

_DEFS = """
CUDA_ENABLED = {enabled}
CUDA_ARCH = "{arch}"
NVCC = "{nvcc}"

def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], nvcc_headers = [],
                 visibility = None, **kwargs):
    \"\"\"Compiles .cu files with nvcc into position-independent objects.

    Produces a cc_library `name` (alwayslink) holding the objects, the headers
    and the CUDA runtime. When CUDA is disabled the library holds only `hdrs`.
    `nvcc_headers`: headers of other packages the .cu files include (file or
    filegroup labels); the package's own headers are always available.
    \"\"\"
    if not CUDA_ENABLED:
        native.cc_library(name = name, hdrs = hdrs, deps = deps, visibility = visibility, **kwargs)
        return
    objs = []
    for src in srcs:
        stem = src[:-3] if src.endswith(".cu") else src
        obj = "_cuda_objs/" + name + "/" + stem.replace("/", "_") + ".pic.o"
        native.genrule(
            name = name + "_" + stem.replace("/", "_") + "_nvcc",
            srcs = _unique([src] + hdrs + nvcc_headers + native.glob(["**/*.h", "**/*.cuh"])),
            outs = [obj],
            cmd = (NVCC + " -c -O3 -std=c++17 -arch=" + CUDA_ARCH +
                   " -Xcompiler -fPIC -I. -I$(GENDIR) " + " ".join(copts) +
                   " -o $@ $(location " + src + ")"),
            message = "nvcc " + src,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda_runtime"],
        alwayslink = 1,
        visibility = visibility,
        **kwargs
    )
"""

def _cuda_configure_impl(ctx):
    mode = ctx.os.environ.get("TANDEM_CUDA", "auto")
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    arch = ctx.os.environ.get("TANDEM_CUDA_ARCH", "sm_90")
    if mode not in ["auto", "on", "off"]:
        fail("TANDEM_CUDA must be auto, on or off, not '%s'" % mode)
    nvcc = ctx.path(root + "/bin/nvcc")
    enabled = False
    if mode != "off":
        if nvcc.exists:
            enabled = True
        elif mode == "on":
            fail("--config=cuda: nvcc not found at %s (set CUDA_PATH)" % nvcc)
    if enabled:
        ctx.symlink(root + "/include", "include")
        ctx.file("BUILD", _BUILD_ON.format(root = root))
    else:
        ctx.file("BUILD", _BUILD_OFF)
    ctx.file("defs.bzl", _DEFS.format(
        enabled = "True" if enabled else "False",
        arch = arch,
        nvcc = str(nvcc),
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["TANDEM_CUDA", "CUDA_PATH", "TANDEM_CUDA_ARCH"],
    local = True,
)
