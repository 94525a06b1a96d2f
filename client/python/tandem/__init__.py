"""Python client of Tandem's gRPC API (tandem.v1.Tandem).

    from tandem import Client
    with Client("127.0.0.1:50051") as client:
        print(client.generate("def fib(n):", max_tokens=32).text)

The protobuf and gRPC stubs (tandem.v1.tandem_pb2, tandem_pb2_grpc) are generated at
build time from proto/tandem/v1/tandem.proto (bazel build //client/python:tandem).
"""
from tandem.client import (Client, Completion, Delta, ModelInfo, SamplingDefaults, Stats,
                           TandemError)

__all__ = ["Client", "Completion", "Delta", "ModelInfo", "SamplingDefaults", "Stats",
           "TandemError"]
