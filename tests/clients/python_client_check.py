"""The `tandem` Python package against a local cluster (driven by clients_e2e_test.sh):
model info (stop ids, sampling defaults), a whole and a streamed greedy completion
agree and equal an explicitly greedy one, token ids and logprobs come
back, bad requests and a wrong token raise TandemError, an unknown method ValueError.
Usage: python3 python_client_check.py HOST:PORT TOKEN"""
import sys

from tandem import Client, SamplingDefaults, TandemError

address, token = sys.argv[1], sys.argv[2]


def expect_error(code, call):
    try:
        call()
    except TandemError as e:
        assert e.code == code, (e.code, e.message)
        return e
    raise AssertionError(f"expected {code}")


with Client(address, token=token) as client:
    info = client.model_info()
    assert info.target == "target" and info.vocab_size > 0 and "draft" in info.methods, info
    # The bundled models: EOS "</s>" = 2, generation_config.json {"do_sample": false}.
    assert info.eos_token_id == 2 and info.stop_token_ids == [2], info
    assert info.default_sampling == SamplingDefaults(0.0, 1.0, 0), info.default_sampling
    print(f"ok: model_info (target {info.target}, methods {info.methods}, stop ids "
          f"{info.stop_token_ids}, defaults {info.default_sampling})")

    prompt = "def fibonacci(n):\n"
    whole = client.generate(prompt, max_tokens=12, method="draft", num_speculative_tokens=3,
                            return_token_ids=True, return_logprobs=True)
    assert whole.text and whole.finish_reason in ("length", "eos"), whole
    assert len(whole.token_ids) == len(whole.logprobs) == whole.stats.generated_tokens
    assert whole.stats.method == "draft" and whole.stats.draft_tokens_proposed > 0, whole.stats
    deltas = list(client.stream(prompt, max_tokens=12))
    assert "".join(d.text for d in deltas) == whole.text
    # Unset sampling arguments are the model's default (greedy): an explicit 0 agrees.
    assert client.generate(prompt, max_tokens=12, temperature=0.0, top_k=0).text == whole.text
    assert deltas[-1].stats is not None and deltas[-1].finish_reason == whole.finish_reason
    print(f"ok: generate == stream ({whole.stats.generated_tokens} tokens, acceptance "
          f"{whole.stats.acceptance_rate:.2f})")

    for delta in client.stream("import os\n", max_tokens=2000, ignore_eos=True):
        break  # Leaving early cancels the request.
    chat = [{"role": "system", "content": "Write Python."}, {"role": "user", "content": "def add(a, b):"}]
    reply = client.generate(chat, max_tokens=12)
    assert reply.text and reply.text == "".join(d.text for d in client.stream(chat, max_tokens=12))
    print("ok: chat messages")
    err = expect_error("INVALID_ARGUMENT", lambda: client.generate(chat[::-1]))  # Template raises.
    assert "a system message must come first" in err.message, err.message
    err = expect_error("INVALID_ARGUMENT", lambda: client.generate(prompt, max_tokens=10**6))
    assert "max_new_tokens" in err.message, err.message
    try:
        client.generate(prompt, method="warp")
        raise AssertionError("expected ValueError")
    except ValueError as e:
        assert "warp" in str(e)
    print("ok: errors (INVALID_ARGUMENT, ValueError)")

with Client(address, token="wrong") as client:
    expect_error("UNAUTHENTICATED", client.model_info)
    print("ok: a wrong token is UNAUTHENTICATED")
