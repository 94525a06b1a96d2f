// The OpenAI-compatible HTTP API over an engine with fake workers, through a real
// in-process HTTP server and cpp-httplib's client: whole and streamed completions agree,
// bad requests get OpenAI-shaped 4xx and the server keeps serving, the bearer token is
// required, a client that disconnects mid-stream has its request cancelled (the running
// sequence count returns to 0), and concurrent requests are served.
#include "coordinator/openai_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_split.h"
#include "coordinator/fake_worker.h"

namespace tandem::coordinator {
namespace {

using json = nlohmann::json;

double Metric(const CoordinatorMetrics& m, const std::string& series) {
  const std::string text = m.Serialize();
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

// The data of each "data: " event of an SSE body.
std::vector<std::string> EventsOf(const std::string& body) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (absl::ConsumePrefix(&line, "data: ")) out.emplace_back(line);
  }
  return out;
}

class OpenAiServerTest : public ::testing::Test {
 protected:
  void Start(OpenAiServerOptions options = {}, std::string token = "", ChatRenderer chat = {},
             RequestSamplingDefaults sampling_defaults = {}) {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
    metrics_ = *CoordinatorMetrics::Create({});
    FakeWorkerOptions target;
    target.step_delay = absl::Milliseconds(2);
    EngineOptions eo;
    eo.monitor_interval = absl::Milliseconds(10);
    engine_ = std::make_unique<Engine>(eo, tokenizer_.get(),
                                       std::make_unique<FakeWorker>(target, "target"), nullptr,
                                       metrics_.get());
    ASSERT_TRUE(engine_->Start(absl::Milliseconds(100)).ok());
    ServerLimits limits;
    limits.context_length = 2048;
    limits.vocab_size = 2048;
    limits.sampling_defaults = sampling_defaults;
    submitter_ = std::make_unique<RequestSubmitter>(engine_.get(), tokenizer_.get(), limits, chat);
    verifier_ = std::make_unique<BearerTokenVerifier>(token);
    options.listen_address = "127.0.0.1:0";
    options.model_name = "target";
    options.heartbeat = absl::Milliseconds(20);
    auto server = OpenAiServer::Start(options, submitter_.get(), verifier_.get(), metrics_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }

  void TearDown() override {
    server_.reset();
    if (engine_) engine_->Stop();
  }

  httplib::Result Post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }

  // A 4xx/5xx answer in OpenAI's shape; returns its error object.
  static json ExpectError(const httplib::Result& r, int status) {
    EXPECT_TRUE(r) << "no response";
    if (!r) return json();
    EXPECT_EQ(r->status, status) << r->body;
    json body = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(body.contains("error")) << r->body;
    if (!body.contains("error")) return json();
    for (const char* key : {"message", "type", "param", "code"}) {
      EXPECT_TRUE(body["error"].contains(key)) << r->body;
    }
    return body["error"];
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RequestSubmitter> submitter_;
  std::unique_ptr<BearerTokenVerifier> verifier_;
  std::unique_ptr<OpenAiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

constexpr char kGreedy[] =
    R"({"model": "target", "prompt": "def add(a, b):", "max_tokens": 12, "temperature": 0,
        "ignore_eos": true)";

TEST_F(OpenAiServerTest, WholeAndStreamedCompletionsAgree) {
  Start();
  httplib::Result whole = Post("/v1/completions", std::string(kGreedy) + "}");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  json body = json::parse(whole->body);  // Heartbeat spaces before the JSON are allowed.
  const std::string text = body["choices"][0]["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_GT(body["usage"]["prompt_tokens"], 0);
  EXPECT_TRUE(body["usage"]["tandem"].contains("acceptance_rate"));

  httplib::Result streamed = Post(
      "/v1/completions",
      std::string(kGreedy) + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::string> events = EventsOf(streamed->body);
  ASSERT_GE(events.size(), 3u) << streamed->body;
  EXPECT_EQ(events.back(), "[DONE]");
  json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 12);
  std::string joined;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json chunk = json::parse(events[i]);
    joined += chunk["choices"][0]["text"].get<std::string>();
    EXPECT_TRUE(chunk["usage"].is_null());
  }
  EXPECT_EQ(joined, text);
}

// A body without "temperature" runs at the model's default, else OpenAI's 1: seen through
// the greedy rule, which requires the resolved temperature to be 0 (the fake target
// verifies greedily only).
constexpr char kGreedyRuleWithoutTemperature[] =
    R"({"model": "target", "prompt": "def add(a, b):", "max_tokens": 12, "ignore_eos": true,
        "speculation": {"acceptance_rule": "greedy"}})";

TEST_F(OpenAiServerTest, OmittedTemperatureIsOpenAisOneWhenTheModelStatesNone) {
  Start();
  json error = ExpectError(Post("/v1/completions", kGreedyRuleWithoutTemperature), 400);
  EXPECT_NE(error["message"].get<std::string>().find("(got 1)"), std::string::npos) << error;
}

TEST_F(OpenAiServerTest, OmittedTemperatureIsGreedyForADoSampleFalseModel) {
  SamplingDefaults bundled;  // models/*/generation_config.json: {"do_sample": false}.
  bundled.do_sample = false;
  Start({}, "", {}, RequestSamplingDefaultsFrom(bundled));
  httplib::Result omitted = Post("/v1/completions", kGreedyRuleWithoutTemperature);
  httplib::Result explicit_zero = Post("/v1/completions", std::string(kGreedy) + "}");
  ASSERT_TRUE(omitted && explicit_zero);
  ASSERT_EQ(omitted->status, 200) << omitted->body;
  EXPECT_EQ(json::parse(omitted->body)["choices"][0]["text"],
            json::parse(explicit_zero->body)["choices"][0]["text"]);
  // A temperature the body gives wins over the model's greedy default.
  json error = ExpectError(Post("/v1/completions", R"({"model": "target", "prompt": "x",
      "temperature": 0.5, "speculation": {"acceptance_rule": "greedy"}})"),
                           400);
  EXPECT_NE(error["message"].get<std::string>().find("(got 0.5)"), std::string::npos) << error;
}

TEST_F(OpenAiServerTest, OmittedTemperatureIsTheModelsForASamplingModel) {
  SamplingDefaults instruct;  // Llama-3 Instruct.
  instruct.do_sample = true;
  instruct.temperature = 0.6f;
  Start({}, "", {}, RequestSamplingDefaultsFrom(instruct));
  json error = ExpectError(Post("/v1/completions", kGreedyRuleWithoutTemperature), 400);
  EXPECT_NE(error["message"].get<std::string>().find("(got 0.6)"), std::string::npos) << error;
}

TEST_F(OpenAiServerTest, ModelsAndHealth) {
  Start();
  httplib::Result models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "target");
  httplib::Result one = client_->Get("/v1/models/target");
  ASSERT_TRUE(one);
  EXPECT_EQ(json::parse(one->body)["id"], "target");
  EXPECT_EQ(ExpectError(client_->Get("/v1/models/gpt-4"), 404)["code"], "model_not_found");
  httplib::Result health = client_->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(OpenAiServerTest, BadRequestsAreOpenAiShapedAndTheServerKeepsServing) {
  OpenAiServerOptions options;
  options.max_body_bytes = 4096;
  Start(options);
  EXPECT_EQ(ExpectError(Post("/v1/completions", "{\"model\": "), 400)["type"],
            "invalid_request_error");
  EXPECT_EQ(ExpectError(Post("/v1/completions", R"({"model": "target", "prompt": "x",
      "max_tokens": "ten"})"),
                        400)["param"],
            "max_tokens");
  EXPECT_EQ(
      ExpectError(Post("/v1/completions", R"({"model": "gpt-4", "prompt": "x"})"), 404)["code"],
      "model_not_found");
  EXPECT_EQ(ExpectError(Post("/v1/chat/completions", R"({"model": "target", "messages":
      [{"role": "wizard", "content": "x"}]})"),
                        400)["param"],
            "messages[0].role");
  // Engine-side validation (temperature out of range) in the same shape.
  ExpectError(Post("/v1/completions", R"({"model": "target", "prompt": "x", "temperature": 500})"),
              400);
  ExpectError(Post("/v1/completions", std::string(8000, ' ')), 413);
  ExpectError(client_->Get("/v1/nothing"), 404);
  // No chat template: a clear 400.
  json error = ExpectError(Post("/v1/chat/completions", R"({"model": "target", "messages":
      [{"role": "user", "content": "hi"}]})"),
                           400);
  EXPECT_NE(error["message"].get<std::string>().find("no chat template"), std::string::npos);
  httplib::Result ok = Post("/v1/completions", std::string(kGreedy) + "}");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(OpenAiServerTest, ChatUsesTheRendererAndReportsItsErrors) {
  Start({}, "", [](const v1::ChatPrompt& chat) -> absl::StatusOr<std::string> {
    const v1::ChatMessage& last = chat.messages(chat.messages_size() - 1);
    if (last.content() == "raise") return absl::InvalidArgumentError("template raised");
    return "<s>[" + last.role() + "] " + last.content() + "\n";
  });
  httplib::Result r = Post("/v1/chat/completions", R"({"model": "target", "max_tokens": 4,
      "temperature": 0, "ignore_eos": true, "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json body = json::parse(r->body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  // The template's "<s>" text is not tokenised: BOS is prepended once.
  const int expected_prompt = static_cast<int>(tokenizer_->Encode("[user] hi\n", true)->size());
  EXPECT_EQ(body["usage"]["prompt_tokens"], expected_prompt);
  json error = ExpectError(Post("/v1/chat/completions", R"({"model": "target",
      "messages": [{"role": "user", "content": "raise"}]})"),
                           400);
  EXPECT_NE(error["message"].get<std::string>().find("template raised"), std::string::npos);
}

TEST_F(OpenAiServerTest, BearerTokenRequired) {
  Start({}, "s3cret");
  EXPECT_EQ(ExpectError(Post("/v1/completions", std::string(kGreedy) + "}"), 401)["type"],
            "authentication_error");
  ExpectError(client_->Get("/v1/models"), 401);
  client_->set_bearer_token_auth("wrong");
  ExpectError(client_->Get("/v1/models"), 401);
  client_->set_bearer_token_auth("s3cret");
  httplib::Result ok = Post("/v1/completions", std::string(kGreedy) + "}");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  httplib::Client anonymous("127.0.0.1", server_->port());
  httplib::Result health = anonymous.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);  // Probes need no secret.
}

TEST_F(OpenAiServerTest, DisconnectCancelsTheRequest) {
  Start();
  for (bool stream : {true, false}) {
    const double cancelled = Metric(*metrics_, "tandem_requests_total{status=\"cancelled\"}");
    std::string body = R"({"model": "target", "prompt": "x", "max_tokens": 2000,
        "ignore_eos": true, "stream": )" +
                       std::string(stream ? "true}" : "false}");
    int received = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body;
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      return ++received < 2;  // Hang up after the second piece.
    };
    client_->send(req);
    EXPECT_GE(received, 2);
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while ((Metric(*metrics_, "tandem_running_sequences") > 0 ||
            Metric(*metrics_, "tandem_requests_total{status=\"cancelled\"}") < cancelled + 1) &&
           absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(Metric(*metrics_, "tandem_running_sequences"), 0) << "stream=" << stream;
    EXPECT_EQ(Metric(*metrics_, "tandem_requests_total{status=\"cancelled\"}"), cancelled + 1)
        << "stream=" << stream;
  }
}

TEST_F(OpenAiServerTest, ConcurrentRequests) {
  Start();
  std::vector<std::thread> threads;
  std::vector<int> statuses(6, 0);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      httplib::Result r =
          c.Post("/v1/completions", std::string(kGreedy) + (i % 2 ? R"(, "stream": true})" : "}"),
                 "application/json");
      statuses[i] = r ? r->status : -1;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s : statuses) EXPECT_EQ(s, 200);
}

}  // namespace
}  // namespace tandem::coordinator
