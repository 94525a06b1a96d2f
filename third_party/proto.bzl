"""C++ code generation for .proto files with Debian's protoc and grpc_cpp_plugin."""

def tandem_proto_library(name, srcs, deps = [], imports = [], grpc = False, visibility = None, testonly = False):
    """Generates C++ (and optionally gRPC) code for `srcs`, which live under
    the package directory and are imported relative to it
    (e.g. proto/tandem/v1/x.proto is imported as "tandem/v1/x.proto").

    `imports` are .proto files of `deps` that `srcs` import (inputs only).
    Produces cc_library `name`; include headers as "tandem/v1/x.pb.h".
    """
    outs = []
    for src in srcs:
        stem = src[:-len(".proto")]
        outs += [stem + ".pb.h", stem + ".pb.cc"]
        if grpc:
            outs += [stem + ".grpc.pb.h", stem + ".grpc.pb.cc"]
    pkg = native.package_name()
    grpc_flags = ""
    if grpc:
        grpc_flags = (" --grpc_out=$(GENDIR)/" + pkg +
                      " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin")
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + imports,
        outs = outs,
        cmd = ("/usr/bin/protoc -I" + pkg + " -I/usr/include --cpp_out=$(GENDIR)/" + pkg +
               grpc_flags + " " + " ".join(["$(location " + s + ")" for s in srcs])),
        message = "protoc " + " ".join(srcs),
        testonly = testonly,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc++"] if grpc else []),
        visibility = visibility,
        testonly = testonly,
    )
