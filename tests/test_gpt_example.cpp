// examples/gpt (gpt_train): the model's parameter names, shapes and initialisation against nanoGPT's; the data
// split, batches and vocabulary; nanoGPT's learning rate; a tiny configuration that learns tiny shakespeare
// beyond the character bigram model; bitwise resume on the CPU; sampling; CPU-vs-GPU agreement and the captured
// step against the eager one (GPU tests skip without a GPU); the command line (exit statuses, the metrics CSV).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "data.h"
#include "minidl/io/safetensors.h"
#include "model.h"
#include "options.h"
#include "sampling.h"
#include "test_util.h"
#include "token_metrics.h"
#include "trainer.h"

#ifndef GPT_TRAIN_BINARY
#error "tests/CMakeLists.txt passes the path of the built gpt_train as GPT_TRAIN_BINARY"
#endif

namespace fs = std::filesystem;
using minidl::Tensor;

namespace {

gpt::Hyper tiny_hyper() {
  gpt::Hyper h;
  h.n_layer = 1;
  h.n_head = 2;
  h.n_embd = 32;
  h.block_size = 16;
  h.batch_size = 4;
  h.dropout = 0.1;
  h.iters = 20;
  h.warmup = 5;
  h.eval_iters = 2;
  return h;
}

std::shared_ptr<const gpt::TokenData> shakespeare(std::int64_t block_size) {
  static const std::string text = [] {
    std::ifstream in(gpt::default_data_file(), std::ios::binary);
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }();
  return std::make_shared<gpt::TokenData>(gpt::TokenData::from_text(text, "input.txt", block_size));
}

gpt::TrainConfig cpu_config(const gpt::Hyper& h) {
  gpt::TrainConfig c;
  c.hyper = h;
  c.progress = false;
  c.seed = 7;
  return c;
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("minidl_gpt_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

/// Every element equal (bitwise for floats: no NaN in these tensors).
void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(minidl::equal(a.cpu(), b.cpu())) << what << " differs";
}

/// nanoGPT's named_parameters() of GPT(config): name -> shape, in its order.
std::vector<std::pair<std::string, minidl::Shape>> nanogpt_parameters(const gpt::GPTConfig& c) {
  const std::int64_t C = c.n_embd;
  std::vector<std::pair<std::string, minidl::Shape>> p = {{"transformer.wte.weight", {c.vocab_size, C}},
                                                          {"transformer.wpe.weight", {c.block_size, C}}};
  const auto linear = [&](const std::string& name, std::int64_t in, std::int64_t out) {
    p.push_back({name + ".weight", {out, in}});
    if (c.bias) p.push_back({name + ".bias", {out}});
  };
  const auto norm = [&](const std::string& name) {
    p.push_back({name + ".weight", {C}});
    if (c.bias) p.push_back({name + ".bias", {C}});
  };
  for (std::int64_t i = 0; i < c.n_layer; ++i) {
    const std::string b = "transformer.h." + std::to_string(i);
    norm(b + ".ln_1");
    linear(b + ".attn.c_attn", C, 3 * C);
    linear(b + ".attn.c_proj", C, C);
    norm(b + ".ln_2");
    linear(b + ".mlp.c_fc", C, 4 * C);
    linear(b + ".mlp.c_proj", 4 * C, C);
  }
  norm("transformer.ln_f");
  return p;
}

/// TF32 off for the scope (float32 comparisons), the previous settings restored after.
struct NoTf32 {
  bool conv = minidl::cuda::allow_tf32_conv(), matmul = minidl::cuda::allow_tf32_matmul();
  NoTf32() { minidl::cuda::set_allow_tf32(false, false); }
  ~NoTf32() { minidl::cuda::set_allow_tf32(conv, matmul); }
};

double std_of(const Tensor& t) { return t.to(minidl::kFloat64).std().item<double>(); }

}  // namespace

TEST(GptExample, ParameterNamesAndShapesAreNanoGPTs) {
  for (const bool bias : {false, true}) {
    gpt::GPTConfig c;
    c.vocab_size = 11;
    c.block_size = 7;
    c.n_layer = 3;
    c.n_head = 2;
    c.n_embd = 8;
    c.bias = bias;
    gpt::GPT model(c);
    const auto expected = nanogpt_parameters(c);
    const auto named = model->named_parameters();
    ASSERT_EQ(named.size(), expected.size()) << "bias " << bias;
    std::size_t i = 0;
    for (const auto& item : named) {
      EXPECT_EQ(item.key(), expected[i].first) << "parameter " << i << ", bias " << bias;
      EXPECT_EQ(item.value().sizes(), expected[i].second) << item.key();
      ++i;
    }
    EXPECT_TRUE(model->named_buffers().is_empty()) << "nanoGPT with PyTorch's attention has no buffers";
  }
}

TEST(GptExample, InitialisationIsNanoGPTs) {
  gpt::GPTConfig c;
  c.vocab_size = 300;
  c.block_size = 64;
  c.n_layer = 8;
  c.n_head = 4;
  c.n_embd = 128;
  c.bias = true;
  minidl::manual_seed(3);
  gpt::GPT model(c);
  const double proj = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const Tensor& p = item.value();
    if (name.find("ln_") != std::string::npos) {
      const double fill = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? 1.0 : 0.0;
      EXPECT_TRUE(minidl::equal(p, minidl::full_like(p, fill))) << name;
    } else if (p.dim() == 1) {
      EXPECT_TRUE(minidl::equal(p, minidl::zeros_like(p))) << name << ": linear biases start at zero";
    } else {
      const bool residual = name.find("c_proj.weight") != std::string::npos;
      const double expected = residual ? proj : 0.02;
      EXPECT_NEAR(std_of(p), expected, 0.06 * expected) << name;
      EXPECT_NEAR(p.to(minidl::kFloat64).mean().item<double>(), 0.0, 0.1 * expected) << name;
    }
  }
}

TEST(GptExample, ForwardGivesLogitsOfEveryPositionAndChecksItsInput) {
  gpt::GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  gpt::GPT model(c);
  const Tensor idx = minidl::randint(13, {3, 5}, minidl::TensorOptions(minidl::kInt64));
  const Tensor logits = model(idx);
  EXPECT_EQ(logits.sizes(), (minidl::Shape{3, 5, 13}));
  // Causality: the logits of the first positions do not depend on later tokens.
  Tensor changed = idx.clone();
  changed.select(1, 4).fill_(0);
  changed.select(1, 3).fill_(1);
  minidl::testing::expect_close(model(changed).narrow(1, 0, 3), logits.narrow(1, 0, 3), 1e-6, 1e-6, "causal");
  EXPECT_ERROR(minidl::ValueError, model(minidl::zeros({2, 9}, minidl::TensorOptions(minidl::kInt64))), "GPT",
               "length 9", "block size is only 8");
  EXPECT_ERROR(minidl::ValueError, model(minidl::zeros({2, 3})), "GPT", "int64");
  c.n_head = 3;
  EXPECT_ERROR(minidl::ValueError, gpt::GPT{c}, "CausalSelfAttention", "n_head 3", "n_embd 16");
}

TEST(GptExample, TextSplitsVocabularyAndBatches) {
  const std::string text =
      "h\xC3\xA9llo w\xC3\xB6rld, hello again \xE2\x82\xAC!";  // two-byte and three-byte characters
  const gpt::TokenData d = gpt::TokenData::from_text(text, "t", 2);
  const std::vector<char32_t> chars = examples::decode_utf8(text, "t");
  EXPECT_EQ(d.tokens(gpt::Split::Train).size(), chars.size() * 9 / 10);
  EXPECT_EQ(d.tokens(gpt::Split::Train).size() + d.tokens(gpt::Split::Val).size(), chars.size());
  // Sorted distinct code points.
  for (std::size_t i = 1; i < d.chars().size(); ++i) EXPECT_LT(d.chars()[i - 1], d.chars()[i]);
  std::vector<std::int64_t> all = d.tokens(gpt::Split::Train);
  all.insert(all.end(), d.tokens(gpt::Split::Val).begin(), d.tokens(gpt::Split::Val).end());
  EXPECT_EQ(d.decode(all), text);
  EXPECT_EQ(d.encode("hello"), std::vector<std::int64_t>(all.begin() + 13, all.begin() + 18));
  EXPECT_ERROR(minidl::ValueError, d.encode("xyz"), "prompt", "U+78 'x'");
  EXPECT_ERROR(minidl::ValueError, gpt::TokenData::from_text("ab\xC3", "bad.txt", 1), "bad.txt", "UTF-8",
               "byte offset 2");
  EXPECT_ERROR(minidl::ValueError, gpt::TokenData::from_text("abc\xC0\x80", "bad.txt", 1), "bad.txt", "offset 3");
  EXPECT_ERROR(minidl::ValueError, gpt::TokenData::from_text("abcdefghij", "short.txt", 4), "short.txt",
               "context + 1 = 5");

  const auto sh = shakespeare(32);
  const gpt::TokenBatch b = gpt::random_batch(*sh, gpt::Split::Val, 3, 0, 8, 32, 1);
  ASSERT_EQ(b.x.sizes(), (minidl::Shape{8, 32}));
  // Targets are the inputs shifted by one, windows of the split.
  EXPECT_TRUE(minidl::equal(b.x.narrow(1, 1, 31), b.y.narrow(1, 0, 31)));
  const std::vector<std::int64_t>& val = sh->tokens(gpt::Split::Val);
  const std::vector<std::int64_t> x = b.x.to_vector<std::int64_t>(), y = b.y.to_vector<std::int64_t>();
  for (std::size_t r = 0; r < 8; ++r) {
    bool found = false;
    for (std::size_t s = 0; s + 32 < val.size() && !found; ++s) {
      found =
          std::equal(x.begin() + r * 32, x.begin() + (r + 1) * 32, val.begin() + s) && y[r * 32 + 31] == val[s + 32];
    }
    EXPECT_TRUE(found) << "row " << r << " is not a window of the validation tokens";
  }
  // The same arguments give the same batch; another iteration, batch index or seed another one.
  EXPECT_TRUE(minidl::equal(gpt::random_batch(*sh, gpt::Split::Val, 3, 0, 8, 32, 1).x, b.x));
  EXPECT_FALSE(minidl::equal(gpt::random_batch(*sh, gpt::Split::Val, 4, 0, 8, 32, 1).x, b.x));
  EXPECT_FALSE(minidl::equal(gpt::random_batch(*sh, gpt::Split::Val, 3, 1, 8, 32, 1).x, b.x));
  EXPECT_FALSE(minidl::equal(gpt::random_batch(*sh, gpt::Split::Val, 3, 0, 8, 32, 2).x, b.x));

  const gpt::TokenData syn = gpt::TokenData::synthetic(50, 1000, 1);
  EXPECT_EQ(syn.vocab_size(), 50);
  EXPECT_FALSE(syn.has_text());
  for (const std::int64_t t : syn.tokens(gpt::Split::Train)) ASSERT_TRUE(t >= 0 && t < 50);
}

TEST(GptExample, LearningRateIsNanoGPTs) {
  gpt::Hyper h;
  h.lr = 1e-3;
  h.min_lr = 1e-4;
  h.warmup = 100;
  h.iters = 5000;
  EXPECT_DOUBLE_EQ(gpt::learning_rate(h, 0), 1e-3 * 1 / 101);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(h, 99), 1e-3 * 100 / 101);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(h, 100), 1e-3);
  EXPECT_NEAR(gpt::learning_rate(h, 2550), 1e-4 + 0.5 * (1e-3 - 1e-4), 1e-15);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(h, 5000), 1e-4);
  EXPECT_DOUBLE_EQ(gpt::learning_rate(h, 6000), 1e-4);
}

TEST(GptExample, PresetsAndOverrides) {
  gpt::Options o;
  gpt::Hyper h = gpt::resolve(o);
  EXPECT_EQ(h.n_layer, 6);
  EXPECT_EQ(h.n_embd, 384);
  EXPECT_EQ(h.block_size, 256);
  EXPECT_EQ(h.batch_size, 64);
  EXPECT_DOUBLE_EQ(h.dropout, 0.2);
  EXPECT_DOUBLE_EQ(h.beta2, 0.99);
  EXPECT_EQ(h.iters, 5000);
  o.config = "gpt2";
  o.n_layer = 4;
  o.lr = 1e-4;
  h = gpt::resolve(o);
  EXPECT_EQ(h.n_layer, 4);
  EXPECT_EQ(h.n_head, 12);
  EXPECT_EQ(h.block_size, 1024);
  EXPECT_EQ(h.batch_size, 16);
  EXPECT_EQ(h.synthetic_vocab, 50304);
  EXPECT_DOUBLE_EQ(h.lr, 1e-4);
  o.n_head = 5;
  EXPECT_THROW(gpt::check_options(o), CLI::ValidationError);
  EXPECT_ERROR(minidl::ValueError, gpt::preset("gpt3"), "--config", "gpt3");
}

// The test the issue asks for: a tiny configuration learns more than the character bigram statistics of the
// training text (the conditional entropy of a character given the one before, the best loss a bigram model can
// reach on the training split) within a few hundred iterations on the CPU.
TEST(GptExample, TinyConfigBeatsTheBigramEntropyOnTheCpu) {
  gpt::Hyper h;
  h.n_layer = 2;
  h.n_head = 2;
  h.n_embd = 64;
  h.block_size = 64;
  h.batch_size = 16;
  h.dropout = 0.0;
  h.iters = 400;
  h.warmup = 20;
  h.lr = 4e-3;
  h.min_lr = 4e-4;
  h.eval_iters = 20;
  const auto data = shakespeare(h.block_size);

  const std::vector<std::int64_t>& train = data->tokens(gpt::Split::Train);
  const auto V = static_cast<std::size_t>(data->vocab_size());
  std::vector<double> pair(V * V, 0.0), first(V, 0.0);
  for (std::size_t i = 0; i + 1 < train.size(); ++i) {
    pair[static_cast<std::size_t>(train[i]) * V + static_cast<std::size_t>(train[i + 1])] += 1;
    first[static_cast<std::size_t>(train[i])] += 1;
  }
  double bigram = 0;
  const auto n = static_cast<double>(train.size() - 1);
  for (std::size_t a = 0; a < V; ++a) {
    for (std::size_t b = 0; b < V; ++b) {
      const double c = pair[a * V + b];
      if (c > 0) bigram -= c / n * std::log(c / first[a]);
    }
  }
  ASSERT_GT(bigram, 2.0);
  ASSERT_LT(bigram, 3.0);

  gpt::Trainer trainer(cpu_config(h), data);
  const double before = trainer.evaluate(gpt::Split::Val);
  EXPECT_NEAR(before, std::log(static_cast<double>(V)), 0.1) << "the initial loss is that of uniform guessing";
  trainer.train(h.iters);
  const double after = trainer.evaluate(gpt::Split::Val);
  std::printf("validation loss %.4f after %lld iterations; bigram entropy of the training split %.4f\n", after,
              static_cast<long long>(h.iters), bigram);
  EXPECT_LT(after, bigram) << "validation loss " << after << " after " << h.iters
                           << " iterations, bigram entropy of the training split " << bigram;
}

TEST(GptExample, ResumeIsBitwiseOnTheCpu) {
  const gpt::Hyper h = tiny_hyper();  // with dropout: the RNG state must come back too
  const auto data = shakespeare(h.block_size);
  const fs::path dir = temp_dir("resume");
  const std::string ckpt = (dir / "ck.safetensors").string();

  gpt::Trainer straight(cpu_config(h), data);
  straight.train(h.iters);

  {
    gpt::Trainer first(cpu_config(h), data);
    first.train(h.iters / 2);
    (void)first.evaluate(gpt::Split::Val);  // as gpt_train evaluates before it saves
    first.save(ckpt);
  }
  minidl::manual_seed(12345);  // the resumed run must not depend on the generators' state before resume()
  gpt::Trainer resumed(cpu_config(h), data);
  resumed.resume(ckpt);
  EXPECT_EQ(resumed.iter(), h.iters / 2);
  resumed.train(h.iters);

  const auto a = straight.model()->named_parameters(), b = resumed.model()->named_parameters();
  for (const auto& item : a) expect_identical(item.value(), b[item.key()], item.key());
  const auto sa = straight.optimizer().state_dict(), sb = resumed.optimizer().state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [k, v] : sa) expect_identical(v, sb.at(k), "optimizer " + k);

  // The checkpoint is nanoGPT's names and the configuration; another configuration is refused.
  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(ckpt);
  EXPECT_EQ(file.metadata.at("gpt.n_layer"), "1");
  EXPECT_EQ(file.tensors.size(), nanogpt_parameters(gpt::gpt_config(h, data->vocab_size())).size());
  gpt::Hyper other = h;
  other.n_embd = 16;
  gpt::Trainer wrong(cpu_config(other), data);
  EXPECT_ERROR(minidl::ValueError, wrong.resume(ckpt), "--resume", "32 wide", "16 wide");
  fs::remove_all(dir);
}

TEST(GptExample, GradientAccumulationMatchesOneBatchOfEveryMicroBatch) {
  // Two micro-batches of 4 sequences take the step one batch of 8 takes: the same windows, the mean gradient.
  gpt::Hyper whole = tiny_hyper();
  whole.dropout = 0.0;
  whole.batch_size = 8;
  whole.iters = 6;
  gpt::Hyper split = whole;
  split.batch_size = 4;
  split.grad_accum = 2;
  const auto data = shakespeare(whole.block_size);
  gpt::Trainer one(cpu_config(whole), data), two(cpu_config(split), data);
  std::vector<double> la, lb;
  const gpt::IntervalStats sa = one.train(whole.iters, &la), sb = two.train(split.iters, &lb);
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(lb[i], la[i], 1e-5 * la[i]) << "step " << i;
  EXPECT_NEAR(sb.loss, sa.loss, 1e-5 * sa.loss);
  const auto a = one.model()->named_parameters(), b = two.model()->named_parameters();
  // The sums differ in order only; AdamW's steps move a weight by up to lr = 1e-3, far above the tolerance.
  for (const auto& item : a) minidl::testing::expect_close(b[item.key()], item.value(), 1e-4, 1e-6, item.key());
}

TEST(GptExample, SamplingContinuesThePromptWithTokensOfTheVocabulary) {
  gpt::GPTConfig c;
  c.vocab_size = 20;
  c.block_size = 6;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_embd = 8;
  gpt::GPT model(c);
  gpt::SampleOptions o;
  o.max_new_tokens = 15;  // beyond the block size: the context is cropped
  const std::vector<std::int64_t> prompt = {3, 1, 4};
  minidl::manual_seed(1);
  const std::vector<std::int64_t> a = gpt::generate(model, prompt, o);
  ASSERT_EQ(a.size(), 18u);
  EXPECT_EQ(std::vector<std::int64_t>(a.begin(), a.begin() + 3), prompt);
  for (const std::int64_t t : a) EXPECT_TRUE(t >= 0 && t < 20);
  minidl::manual_seed(1);
  EXPECT_EQ(gpt::generate(model, prompt, o), a) << "a seed gives the same text";
  EXPECT_TRUE(model->is_training()) << "generate leaves the mode as it found it";
  // top_k 1 is greedy decoding: the same whatever the seed, each token the argmax of its logits.
  o.top_k = 1;
  o.max_new_tokens = 4;
  minidl::manual_seed(2);
  const std::vector<std::int64_t> g1 = gpt::generate(model, prompt, o);
  minidl::manual_seed(3);
  EXPECT_EQ(gpt::generate(model, prompt, o), g1);
  model->eval();
  const Tensor logits = model(minidl::from_vector(prompt, {1, 3}));
  EXPECT_EQ(logits.select(1, 2).argmax(-1).item<std::int64_t>(), g1[3]);
  EXPECT_ERROR(minidl::ValueError, gpt::generate(model, {}, o), "generate", "empty");
}

TEST(GptExample, MetricsHeaderIsTheIssues) {
  EXPECT_STREQ(examples::TokenMetricsWriter::header(), "iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s");
}

namespace {

struct CliResult {
  int status;
  std::string output;
};

CliResult run_cli(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("minidl_gpt_cli_" + std::to_string(::getpid()) + ".log");
  const int raw = std::system((std::string(GPT_TRAIN_BINARY) + " " + args + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::string out{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  fs::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, out};
}

const char* kTinyFlags =
    " --device cpu --threads 2 --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 2 --dropout 0"
    " --eval-iters 2 --no-progress";

}  // namespace

TEST(GptExample, CommandLineErrorsAndMetrics) {
  CliResult r = run_cli("--n-head 5 --n-embd 64");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--n-head"), std::string::npos) << r.output;
  r = run_cli("--config gpt3");
  EXPECT_EQ(r.status, 2) << r.output;
  r = run_cli("--amp int8" + std::string(kTinyFlags));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--amp"), std::string::npos) << r.output;
  r = run_cli("--resume /nonexistent/ck.safetensors");
  EXPECT_EQ(r.status, 2) << r.output;

  const fs::path dir = temp_dir("cli");
  const std::string csv = (dir / "m.csv").string(), ck = (dir / "ck.safetensors").string();
  r = run_cli(std::string(kTinyFlags) + " --iters 6 --eval-every 3 --metrics " + csv + " --save " + ck +
              " --sample 20 --prompt ROMEO");
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(csv);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s");
  const std::vector<std::string> prefixes = {"0,val,", "3,train,", "3,val,", "6,train,", "6,val,"};
  for (std::size_t i = 0; i < prefixes.size(); ++i) EXPECT_EQ(lines[i + 1].rfind(prefixes[i], 0), 0u) << lines[i + 1];
  EXPECT_TRUE(fs::exists(ck) && fs::exists(gpt::state_path(ck)));
  EXPECT_NE(r.output.find("ROMEO"), std::string::npos) << "the sample starts with the prompt: " << r.output;
  // Resuming at the end trains nothing more, appends to the metrics, and samples again.
  r = run_cli(std::string(kTinyFlags) + " --iters 6 --eval-every 3 --metrics " + csv + " --resume " + ck);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

// --amp on the CPU: bf16 learns with float32 parameters and gradients; fp16's GradScaler state travels with the
// checkpoint.
TEST(GptExample, AmpTrainsAndResumesOnTheCpu) {
  gpt::Hyper h = tiny_hyper();
  const auto data = shakespeare(h.block_size);
  gpt::TrainConfig bf16 = cpu_config(h);
  bf16.amp = minidl::kBFloat16;
  gpt::Trainer t(bf16, data);
  EXPECT_EQ(t.grad_scaler(), nullptr) << "bfloat16 needs no GradScaler";
  const double before = t.evaluate(gpt::Split::Val);
  t.train(h.iters);
  const double after = t.evaluate(gpt::Split::Val);
  EXPECT_LT(after, before - 0.1) << "bf16 autocast: validation loss " << before << " -> " << after;
  for (const auto& item : t.model()->named_parameters()) {
    EXPECT_EQ(item.value().dtype(), minidl::kFloat32) << item.key();
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_EQ(item.value().grad().dtype(), minidl::kFloat32) << item.key();
  }

  gpt::TrainConfig fp16 = cpu_config(h);
  fp16.amp = minidl::kFloat16;
  const fs::path dir = temp_dir("amp");
  const std::string ckpt = (dir / "ck.safetensors").string();
  {
    gpt::Trainer first(fp16, data);
    ASSERT_NE(first.grad_scaler(), nullptr);
    first.train(h.iters / 2);
    (void)first.evaluate(gpt::Split::Val);
    first.grad_scaler()->update(1024.0);  // a scale the fresh scaler does not start from
    first.save(ckpt);
  }
  gpt::Trainer resumed(fp16, data);
  resumed.resume(ckpt);
  EXPECT_EQ(resumed.grad_scaler()->get_scale(), 1024.0);
  fs::remove_all(dir);

  const CliResult r = run_cli("--amp bf16 --iters 4 --eval-every 4" + std::string(kTinyFlags));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--amp bf16 (autocast to bfloat16, float32 parameters)"), std::string::npos) << r.output;
}

// CPU vs GPU: the same 20 steps in float32 (TF32 off) agree within 1e-4 on the loss.
TEST(GptExample, GpuTrainsAsTheCpu) {
  MINIDL_REQUIRE_GPU();
  const NoTf32 no_tf32;
  gpt::Hyper h = tiny_hyper();
  h.dropout = 0.0;
  h.n_embd = 64;
  h.block_size = 32;
  h.batch_size = 8;
  const auto data = shakespeare(h.block_size);
  std::vector<double> cpu_losses, gpu_losses;
  gpt::Trainer cpu(cpu_config(h), data);
  cpu.train(20, &cpu_losses);
  gpt::TrainConfig gc = cpu_config(h);
  gc.device = minidl::Device(minidl::kCUDA, 0);
  gpt::Trainer gpu(gc, data);
  gpu.train(20, &gpu_losses);
  ASSERT_EQ(cpu_losses.size(), 20u);
  for (std::size_t i = 0; i < 20; ++i) EXPECT_NEAR(gpu_losses[i], cpu_losses[i], 1e-4) << "step " << i;
}

// The captured step does what the eager one does: the same weights after 12 iterations (two eager warm-up
// steps, the capture, nine replays, the learning rate changing at every one), within float32 rounding.
TEST(GptExample, GpuCapturedStepMatchesEagerSteps) {
  MINIDL_REQUIRE_GPU();
  const NoTf32 no_tf32;
  for (const std::int64_t micro : {1, 2}) {  // with gradient accumulation, the graph holds both micro-batches
    gpt::Hyper h = tiny_hyper();
    h.dropout = 0.0;
    h.grad_accum = micro;
    const auto data = shakespeare(h.block_size);
    gpt::TrainConfig gc = cpu_config(h);
    gc.device = minidl::Device(minidl::kCUDA, 0);
    gpt::Trainer graphed(gc, data);
    const gpt::IntervalStats s = graphed.train(12);
    EXPECT_GT(graphed.graph_nodes(), 0u);
    gc.cuda_graph = false;
    gpt::Trainer eager(gc, data);
    const gpt::IntervalStats e = eager.train(12);
    EXPECT_EQ(eager.graph_nodes(), 0u);
    EXPECT_NEAR(s.loss, e.loss, 1e-4) << "grad_accum " << micro;
    const auto a = graphed.model()->named_parameters(), b = eager.model()->named_parameters();
    for (const auto& item : a) {
      // The capture takes the matmul algorithms untimed, so the two runs may round differently; a learning rate
      // that did not reach the captured update, or a stale batch, would move the weights by about lr = 1e-3.
      minidl::testing::expect_close(item.value().cpu(), b[item.key()].cpu(), 1e-3, 1e-4,
                                    item.key() + " grad_accum " + std::to_string(micro));
    }
  }
}
