"""A thin, typed wrapper over the generated tandem.v1.Tandem stub: generate, stream and
model info, with Tandem's speculation controls as keyword arguments."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, List, Mapping, Optional, Sequence, Union

import grpc

from tandem.v1 import tandem_pb2, tandem_pb2_grpc

# A text, token ids, or chat messages ({"role": ..., "content": ...}; the server renders
# them with the model's chat template).
Prompt = Union[str, Sequence[int], Sequence[Mapping[str, str]]]


class TandemError(Exception):
    """A failed call: `code` is the gRPC status name (e.g. "INVALID_ARGUMENT")."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class Stats:
    """Per-request statistics (tandem.v1.RequestStats; `raw` has every field)."""

    prompt_tokens: int
    generated_tokens: int
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    acceptance_rate: float
    mean_accepted_length: float
    method: str  # "draft", "prompt_lookup", "none", ...
    time_to_first_token_ms: float
    total_time_ms: float
    seed: int
    raw: tandem_pb2.RequestStats

    @staticmethod
    def from_proto(s: tandem_pb2.RequestStats) -> "Stats":
        return Stats(s.prompt_tokens, s.generated_tokens, s.draft_tokens_proposed,
                     s.draft_tokens_accepted, s.acceptance_rate, s.mean_accepted_length,
                     _short_name(tandem_pb2.SpeculationMethod.Name(s.method),
                                 "SPECULATION_METHOD_"),
                     s.time_to_first_token_ms, s.total_time_ms, s.seed, s)


@dataclass
class Completion:
    """A whole completion. finish_reason: "length", "eos" or "stop"."""

    request_id: str
    text: str
    finish_reason: str
    stats: Stats
    token_ids: List[int] = field(default_factory=list)  # With return_token_ids.
    logprobs: List[float] = field(default_factory=list)  # With return_logprobs.


@dataclass
class Delta:
    """One streamed piece; the last one has finish_reason and stats set."""

    request_id: str
    text: str
    token_ids: List[int]
    logprobs: List[float]
    finish_reason: Optional[str] = None
    stats: Optional[Stats] = None


@dataclass
class SamplingDefaults:
    """What a request's unset sampling arguments resolve to on this server: the model's
    generation_config.json defaults (tandem.proto's SamplingParams has the rule)."""

    temperature: float  # 0 = greedy.
    top_p: float  # 1 = no limit.
    top_k: int  # 0 = no limit.


@dataclass
class ModelInfo:
    """The served models and limits (tandem.v1.ModelInfo; `raw` has every field)."""

    target: str
    draft: Optional[str]
    draft_available: bool
    vocab_size: int
    context_length: int
    max_new_tokens_limit: int
    max_speculative_tokens: int
    methods: List[str]
    eos_token_id: int  # The tokenizer's own EOS (-1: none).
    stop_token_ids: List[int]  # Generation ends at any of these (EOS included).
    default_sampling: SamplingDefaults
    raw: tandem_pb2.ModelInfo


def _short_name(name: str, prefix: str) -> str:
    return name[len(prefix):].lower() if name.startswith(prefix) else name.lower()


def _enum_value(enum, prefix: str, name: str, what: str) -> int:
    try:
        return enum.Value(prefix + name.upper())
    except ValueError:
        choices = ", ".join(_short_name(n, prefix) for n in enum.keys())
        raise ValueError(f"unknown {what} {name!r} (one of: {choices})") from None


def _finish_reason(value: int) -> Optional[str]:
    if value == tandem_pb2.FINISH_REASON_UNSPECIFIED:
        return None
    return _short_name(tandem_pb2.FinishReason.Name(value), "FINISH_REASON_")


class Client:
    """A connection to a Tandem coordinator. `token`: the server's bearer token, if any;
    `root_certificates` (PEM bytes) or `tls=True` connect with TLS. Thread-safe."""

    def __init__(self, address: str = "127.0.0.1:50051", *, token: Optional[str] = None,
                 tls: bool = False, root_certificates: Optional[bytes] = None,
                 timeout: float = 600.0):
        if tls or root_certificates is not None:
            self._channel = grpc.secure_channel(
                address, grpc.ssl_channel_credentials(root_certificates))
        else:
            self._channel = grpc.insecure_channel(address)
        self._stub = tandem_pb2_grpc.TandemStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._timeout = timeout

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    @staticmethod
    def request(prompt: Prompt, *, max_tokens: int = 0, temperature: Optional[float] = None,
                top_p: Optional[float] = None, top_k: Optional[int] = None,
                seed: Optional[int] = None,
                stop: Sequence[str] = (), method: str = "auto",
                num_speculative_tokens: Optional[int] = None, acceptance_rule: str = "default",
                return_token_ids: bool = False, return_logprobs: bool = False,
                ignore_eos: bool = False, request_id: str = "") -> tandem_pb2.GenerateRequest:
        """The GenerateRequest the keyword arguments describe (max_tokens 0: the server's
        default; temperature, top_p, top_k None: the model's defaults, see
        ModelInfo.default_sampling (greedy unless the model's generation_config.json
        samples); num_speculative_tokens None: adaptive K). ValueError for an unknown
        method or rule name."""
        r = tandem_pb2.GenerateRequest(request_id=request_id, max_new_tokens=max_tokens,
                                       stop=list(stop), return_token_ids=return_token_ids,
                                       return_logprobs=return_logprobs, ignore_eos=ignore_eos)
        if isinstance(prompt, str):
            r.text = prompt
        elif len(prompt) and isinstance(prompt[0], Mapping):
            for m in prompt:
                r.chat.messages.add(role=m["role"], content=m["content"])
        else:
            r.token_ids.ids.extend(prompt)
        if temperature is not None:
            r.sampling.temperature = temperature
        if top_k is not None:
            r.sampling.top_k = top_k
        if top_p is not None:
            r.sampling.top_p = top_p
        if seed is not None:
            r.sampling.seed = seed
        r.speculation.method = _enum_value(tandem_pb2.SpeculationMethod, "SPECULATION_METHOD_",
                                           method, "method")
        r.speculation.acceptance_rule = _enum_value(tandem_pb2.AcceptanceRule,
                                                    "ACCEPTANCE_RULE_", acceptance_rule,
                                                    "acceptance rule")
        if num_speculative_tokens is not None:
            r.speculation.num_speculative_tokens = num_speculative_tokens
        return r

    def generate(self, prompt: Prompt, **options) -> Completion:
        """Generates a whole completion; `options` as in request(). Raises TandemError."""
        try:
            r = self._stub.Generate(self.request(prompt, **options), timeout=self._timeout,
                                    metadata=self._metadata)
        except grpc.RpcError as e:
            raise TandemError(e.code().name, e.details()) from None
        return Completion(r.request_id, r.text, _finish_reason(r.finish_reason),
                          Stats.from_proto(r.stats), list(r.token_ids), list(r.logprobs))

    def stream(self, prompt: Prompt, **options) -> Iterator[Delta]:
        """Yields text deltas as tokens are committed; leaving the loop early cancels the
        request on the server. Raises TandemError."""
        call = self._stub.GenerateStream(self.request(prompt, **options),
                                         timeout=self._timeout, metadata=self._metadata)
        try:
            for m in call:
                yield Delta(m.request_id, m.text_delta, list(m.token_ids), list(m.logprobs),
                            _finish_reason(m.finish_reason),
                            Stats.from_proto(m.stats) if m.HasField("stats") else None)
        except grpc.RpcError as e:
            raise TandemError(e.code().name, e.details()) from None
        finally:
            call.cancel()

    def model_info(self) -> ModelInfo:
        """The served models and limits. Raises TandemError."""
        try:
            i = self._stub.GetModelInfo(tandem_pb2.GetModelInfoRequest(), timeout=self._timeout,
                                        metadata=self._metadata)
        except grpc.RpcError as e:
            raise TandemError(e.code().name, e.details()) from None
        d = i.default_sampling
        return ModelInfo(i.target.name, i.draft.name if i.HasField("draft") else None,
                         i.draft_available, i.target.vocab_size, i.context_length,
                         i.max_new_tokens_limit, i.max_speculative_tokens,
                         [_short_name(tandem_pb2.SpeculationMethod.Name(m), "SPECULATION_METHOD_")
                          for m in i.methods], i.eos_token_id, list(i.stop_token_ids),
                         SamplingDefaults(d.temperature, d.top_p if d.HasField("top_p") else 1.0,
                                          d.top_k), i)
