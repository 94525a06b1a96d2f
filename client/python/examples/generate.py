"""Tandem's Python client: model info, a whole completion and a streamed one.

    bazel build //client/python:tandem
    PYTHONPATH=bazel-bin/client/python/pkg python3 client/python/examples/generate.py [HOST:PORT]
"""
import sys

from tandem import Client

with Client(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051") as client:
    info = client.model_info()
    print(f"target {info.target}, draft {info.draft}, methods {info.methods}, "
          f"stop ids {info.stop_token_ids}, sampling defaults {info.default_sampling}")
    done = client.generate("def fibonacci(n):\n", max_tokens=32, method="draft")
    print(done.text)
    print(f"acceptance {done.stats.acceptance_rate:.2f}, "
          f"{done.stats.mean_accepted_length:.2f} tokens per target step")
    for delta in client.stream("class Stack:\n", max_tokens=32):
        print(delta.text, end="", flush=True)
    print()
