// Medusa heads: loading (layout, config keys, every start-up error), the forward on the
// CPU backend against a naive reference, and the bundled heads against the PyTorch
// oracle's golden logits (tests/reference/goldens/medusa/heads.safetensors, 1e-4).
#include "model/medusa_heads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"

namespace tandem {
namespace {

constexpr int kHidden = 8;
constexpr int kVocab = 12;

struct Heads {
  int num_heads = 2;
  int num_layers = 1;
  // [head][layer] weights [hidden * hidden], biases [hidden]; lm [vocab * hidden].
  std::vector<std::vector<std::vector<float>>> w, b;
  std::vector<std::vector<float>> lm;
};

Heads RandomHeads(int num_heads, int num_layers, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  const auto fill = [&](int n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  Heads h;
  h.num_heads = num_heads;
  h.num_layers = num_layers;
  h.w.resize(num_heads);
  h.b.resize(num_heads);
  for (int i = 0; i < num_heads; ++i) {
    for (int j = 0; j < num_layers; ++j) {
      h.w[i].push_back(fill(kHidden * kHidden));
      h.b[i].push_back(fill(kHidden));
    }
    h.lm.push_back(fill(kVocab * kHidden));
  }
  return h;
}

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteConfig(const std::string& dir, const std::string& medusa_keys) {
  ASSERT_TRUE(
      WriteBinaryFile(dir + "/config.json", "{\"hidden_size\": 8" + medusa_keys + "}").ok());
}

// Writes `h` in Medusa's layout; `skip` names a tensor to leave out, `hidden` the
// residual blocks' size as written.
std::string WriteHeads(const Heads& h, const std::string& name, const std::string& skip = "",
                       int hidden = kHidden) {
  const std::string dir = TempDir(name);
  WriteConfig(dir, ", \"medusa_num_heads\": " + std::to_string(h.num_heads) +
                       ", \"medusa_num_layers\": " + std::to_string(h.num_layers));
  std::vector<SafetensorsTensorData> tensors;
  const auto add = [&](const std::string& n, std::vector<int64_t> shape, std::vector<float> v) {
    if (n != skip)
      tensors.push_back({n, SafetensorsDType::kF32, shape, FloatBytes(v, SafetensorsDType::kF32)});
  };
  for (int i = 0; i < h.num_heads; ++i) {
    for (int j = 0; j < h.num_layers; ++j) {
      const std::string p = std::to_string(i) + "." + std::to_string(j) + ".linear.";
      std::vector<float> w = h.w[i][j];
      w.resize(hidden * hidden);
      add(p + "weight", {hidden, hidden}, w);
      add(p + "bias", {kHidden}, h.b[i][j]);
    }
    add(std::to_string(i) + "." + std::to_string(h.num_layers) + ".weight", {kVocab, kHidden},
        h.lm[i]);
  }
  EXPECT_TRUE(WriteBinaryFile(dir + "/" + kMedusaHeadsFile, SerializeSafetensors(tensors)).ok());
  return dir;
}

LlamaConfig Base() {
  LlamaConfig c;
  c.hidden_size = kHidden;
  c.vocab_size = kVocab;
  return c;
}

// Head i on `x` in double, straight from the definition.
std::vector<double> NaiveHead(const Heads& h, int i, const std::vector<float>& hidden) {
  std::vector<double> x(hidden.begin(), hidden.end());
  for (int j = 0; j < h.num_layers; ++j) {
    std::vector<double> y = x;
    for (int o = 0; o < kHidden; ++o) {
      double t = h.b[i][j][o];
      for (int k = 0; k < kHidden; ++k) t += double(h.w[i][j][o * kHidden + k]) * x[k];
      y[o] += t / (1.0 + std::exp(-t));
    }
    x = y;
  }
  std::vector<double> logits(kVocab);
  for (int v = 0; v < kVocab; ++v) {
    for (int k = 0; k < kHidden; ++k) logits[v] += double(h.lm[i][v * kHidden + k]) * x[k];
  }
  return logits;
}

TEST(MedusaHeadsTest, AbsentFileIsNoHeads) {
  const std::string dir = TempDir("absent");
  WriteConfig(dir, "");
  auto loaded = LoadMedusaHeads(dir, Base());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->has_value());
}

TEST(MedusaHeadsTest, ForwardMatchesNaiveReference) {
  for (int layers : {0, 1, 2}) {
    const Heads h = RandomHeads(3, layers, 7 + layers);
    auto loaded = LoadMedusaHeads(WriteHeads(h, "fwd" + std::to_string(layers)), Base());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_TRUE(loaded->has_value());
    EXPECT_EQ((*loaded)->config.choices, DefaultMedusaChoices(3));
    std::unique_ptr<Backend> backend = MakeCpuBackend(1);
    auto heads = MedusaHeads::Create(**loaded, backend.get());
    ASSERT_TRUE(heads.ok()) << heads.status();
    std::vector<float> hidden = {0.3f, -1.2f, 0.8f, 0.0f, 2.0f, -0.5f, 0.1f, 1.1f};
    std::vector<float> logits;
    ASSERT_TRUE((*heads)->Forward(hidden.data(), &logits).ok());
    ASSERT_EQ(logits.size(), 3u * kVocab);
    for (int i = 0; i < 3; ++i) {
      const std::vector<double> want = NaiveHead(h, i, hidden);
      for (int v = 0; v < kVocab; ++v) {
        EXPECT_NEAR(logits[i * kVocab + v], want[v], 1e-4) << "layers " << layers << " head " << i;
      }
    }
    std::vector<float> first_two;  // Only the heads asked for.
    ASSERT_TRUE((*heads)->Forward(hidden.data(), &first_two, 2).ok());
    EXPECT_EQ(first_two, std::vector<float>(logits.begin(), logits.begin() + 2 * kVocab));
  }
}

void ExpectLoadError(const std::string& dir, const std::string& needle) {
  auto loaded = LoadMedusaHeads(dir, Base());
  ASSERT_FALSE(loaded.ok()) << needle;
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << loaded.status();
  EXPECT_NE(loaded.status().message().find(needle), std::string::npos) << loaded.status();
}

TEST(MedusaHeadsTest, StartUpErrorsNameTheProblem) {
  const Heads h = RandomHeads(2, 1, 3);
  std::string dir = WriteHeads(h, "nokey");
  WriteConfig(dir, ", \"medusa_num_heads\": 2");
  ExpectLoadError(dir, "\"medusa_num_layers\" is missing");
  ExpectLoadError(WriteHeads(h, "notensor", "1.1.weight"), "tensor \"1.1.weight\" is missing");
  ExpectLoadError(WriteHeads(h, "hidden", "", 6), "expected shape [8, 8], found [6, 6]");
  LlamaConfig other_vocab = Base();
  other_vocab.vocab_size = 16;
  auto loaded = LoadMedusaHeads(WriteHeads(h, "vocab"), other_vocab);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("expected shape [16, 8], found [12, 8]"),
            std::string::npos)
      << loaded.status();
  dir = WriteHeads(h, "extra");
  WriteConfig(dir, ", \"medusa_num_heads\": 1, \"medusa_num_layers\": 1");
  ExpectLoadError(dir, "holds 6 tensors, expected 3");
  dir = WriteHeads(h, "choices");
  WriteConfig(dir,
              ", \"medusa_num_heads\": 2, \"medusa_num_layers\": 1, "
              "\"medusa_choices\": [[0], [1, 0]]");
  ExpectLoadError(dir, "path [1,0] comes before its parent path");
  ASSERT_TRUE(WriteBinaryFile(dir + "/" + kMedusaHeadsFile, "not a safetensors file").ok());
  WriteConfig(dir, ", \"medusa_num_heads\": 2, \"medusa_num_layers\": 1");
  ExpectLoadError(dir, kMedusaHeadsFile);
}

TEST(MedusaHeadsTest, ChoicesValidation) {
  EXPECT_TRUE(ValidateMedusaChoices({{0}, {1}, {0, 0}, {0, 0, 3}}, 3, "x").ok());
  EXPECT_FALSE(ValidateMedusaChoices({{0, 0, 0, 0}}, 3, "x").ok());
  EXPECT_FALSE(ValidateMedusaChoices({{0}, {0}}, 3, "x").ok());
  EXPECT_FALSE(ValidateMedusaChoices({{}}, 3, "x").ok());
  EXPECT_FALSE(ValidateMedusaChoices({{kMaxMedusaRank}}, 3, "x").ok());
  for (int n = 1; n <= 4; ++n) {
    EXPECT_TRUE(ValidateMedusaChoices(DefaultMedusaChoices(n), n, "default").ok());
  }
  MedusaConfig c;
  c.choices = {{0}, {0, 4}, {2}};
  EXPECT_EQ(c.TopK(), 5);
  EXPECT_EQ(c.Depth(), 2);
  EXPECT_EQ(c.TopK(1), 1);
  EXPECT_EQ(c.Depth(1), 1);
  EXPECT_EQ(c.TopK(0), 0);
}

// The bundled heads against the PyTorch oracle (tests/reference/medusa_ref.py): golden
// hidden rows in, every head's logits out.
TEST(MedusaHeadsTest, BundledHeadsMatchThePyTorchOracle) {
  auto config = LoadLlamaConfig("models/target");
  ASSERT_TRUE(config.ok()) << config.status();
  auto loaded = LoadMedusaHeads("models/target", *config);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->config.num_heads, 4);
  auto golden = SafetensorsFile::Open("tests/reference/goldens/medusa/heads.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto hidden = (*golden)->Find("hidden");
  auto want = (*golden)->Find("logits");
  ASSERT_TRUE(hidden.ok() && want.ok());
  const int rows = static_cast<int>(hidden->shape[0]);
  const int vocab = config->vocab_size, h = config->hidden_size;
  ASSERT_EQ(want->shape, (std::vector<int64_t>{rows, 4, vocab}));
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  auto heads = MedusaHeads::Create(**loaded, backend.get());
  ASSERT_TRUE(heads.ok()) << heads.status();
  const float* x = static_cast<const float*>(hidden->data);
  const float* expected = static_cast<const float*>(want->data);
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> logits;
    ASSERT_TRUE((*heads)->Forward(x + r * h, &logits).ok());
    for (int k = 0; k < 4 * vocab; ++k) {
      worst = std::max(worst, std::abs(double(logits[k]) - expected[r * 4 * vocab + k]));
    }
  }
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
}  // namespace tandem
