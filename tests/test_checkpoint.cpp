// Model checkpoints and training state (include/minidl/io/checkpoint.h) and the RNG snapshot (random.h):
// exact round trips, the file seen by a plain safetensors reader, every mismatch listed by a failed load
// with the model left unchanged, corrupt files, failed writes, an exact resume, and CPU <-> CUDA files.
#include "file_helpers.h"
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "minidl/io/checkpoint.h"
#include "minidl/io/safetensors.h"
#include "minidl/random.h"
#include "test_util.h"

using namespace minidl;

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

using test_files::message_of;
using test_files::slurp;
using test_files::spit;
/// Each test's files live in a fresh temp directory.
struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("minidl_ckpt_") {}
};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing \"" << (needle) << "\" in: " << (haystack)

Bytes bytes_of(const Tensor& t) {
  const Tensor host = t.detach().cpu().contiguous();
  const auto* p = static_cast<const std::uint8_t*>(host.data_ptr());
  return Bytes(p, p + host.nbytes());
}

// Every element bit for bit, plus dtype and shape.
void expect_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  EXPECT_EQ(actual.dtype(), expected.dtype()) << what;
  EXPECT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(bytes_of(actual) == bytes_of(expected)) << what << ": values differ";
}

struct Arch {
  std::int64_t fc_out = 4;
  bool bn = true;
  bool conv_f64 = false;
  bool extra = false;
};

// Linear + BatchNorm1d + Conv2d, or a variant of it for the mismatch tests.
std::shared_ptr<nn::Module> make_net(const Arch& a = {}) {
  auto net = std::make_shared<nn::Module>("SmallNet");
  net->register_module("fc", std::make_shared<nn::LinearImpl>(6, a.fc_out));
  if (a.bn) net->register_module("bn", std::make_shared<nn::BatchNorm1dImpl>(nn::BatchNormOptions(4)));
  auto conv = net->register_module("conv", std::make_shared<nn::Conv2dImpl>(2, 3, 3));
  if (a.conv_f64) conv->to(kFloat64);
  if (a.extra) net->register_module("extra", std::make_shared<nn::LinearImpl>(2, 2));
  return net;
}

// Fresh random values in every parameter and buffer (positive, so running_var stays valid).
void randomize(nn::Module& m) {
  NoGradGuard no_grad;
  for (auto& [name, t] : io::state_dict(m)) {
    if (is_floating_point(t.dtype())) {
      t.copy_(uniform(t.sizes(), 0.1, 2.0, TensorOptions(t.dtype())));
    } else {
      t.fill_(std::floor(rand({}, kFloat64).item<double>() * 1000.0) + 1.0);
    }
  }
}

using Snapshot = std::map<std::string, Tensor>;  // host copies

Snapshot snapshot(const nn::Module& m) {
  Snapshot out;
  for (const auto& [name, t] : io::state_dict(m)) out[name] = t.detach().cpu().clone();
  return out;
}

void expect_same(const Snapshot& actual, const Snapshot& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, t] : expected) {
    ASSERT_EQ(actual.count(name), 1u) << name;
    expect_identical(actual.at(name), t, name);
  }
}

bool any_differs(const Snapshot& a, const Snapshot& b) {
  for (const auto& [name, t] : a) {
    if (bytes_of(t) != bytes_of(b.at(name))) return true;
  }
  return false;
}

std::vector<std::string> names_of(const OrderedDict<std::string, Tensor>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// ---- model checkpoints ---------------------------------------------------------------------------------------

TEST(Checkpoint, RoundTripRestoresEveryElement) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  auto saved = make_net();
  randomize(*saved);
  io::save(*saved, path);

  auto fresh = make_net();
  ASSERT_TRUE(any_differs(snapshot(*fresh), snapshot(*saved)));
  io::load(*fresh, path);
  expect_same(snapshot(*fresh), snapshot(*saved));
  EXPECT_TRUE(fresh->named_parameters()[0].second.requires_grad());  // still trainable parameters
}

TEST(Checkpoint, FileIsPlainSafetensors) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  auto net = make_net();
  randomize(*net);
  io::save(*net, path);

  const Bytes raw = slurp(path);
  ASSERT_GE(raw.size(), 8u);
  std::uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= std::uint64_t{raw[i]} << (8 * i);
  EXPECT_EQ(header_size % 8, 0u) << "header not padded to 8 bytes";

  const io::SafetensorsContents contents = io::read_safetensors(path);
  std::vector<std::string> expected_names = names_of(net->named_parameters());
  for (const std::string& b : names_of(net->named_buffers())) expected_names.push_back(b);
  std::vector<std::string> file_names;
  for (const auto& r : contents.tensors) file_names.push_back(r.name);
  EXPECT_EQ(file_names, expected_names);  // parameters then buffers, in registration order
  EXPECT_TRUE(contents.metadata.empty());

  const Snapshot values = snapshot(*net);
  for (const auto& r : contents.tensors) {
    SCOPED_TRACE(r.name);
    const Tensor& t = values.at(r.name);
    EXPECT_EQ(r.dtype, t.dtype() == kInt64 ? "I64" : "F32");
    EXPECT_EQ(r.shape, t.sizes());
    EXPECT_TRUE(r.data == bytes_of(t)) << "element bytes differ";
  }
}

TEST(Checkpoint, MetadataRoundTrips) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  auto net = make_net();
  const std::map<std::string, std::string> metadata = {
      {"epoch", "3"}, {"note", "ünïcode \"quoted\" \\ and\nnewline"}, {"empty", ""}};
  io::save(*net, path, metadata);
  EXPECT_EQ(io::read_safetensors(path).metadata, metadata);
  io::load(*make_net(), path);  // metadata does not disturb loading
}

TEST(Checkpoint, StateDictAndSaveStateDict) {
  auto net = make_net();
  const auto dict = io::state_dict(*net);
  ASSERT_EQ(dict.size(), net->named_parameters().size() + net->named_buffers().size());
  for (const auto& [name, t] : net->named_parameters()) EXPECT_TRUE(dict.at(name).is_same(t)) << name;
  for (const auto& [name, t] : net->named_buffers()) EXPECT_TRUE(dict.at(name).is_same(t)) << name;

  TempDir dir;
  const std::string path = dir.file("dict.safetensors");
  const std::map<std::string, Tensor> tensors = {
      {"a", uniform({3, 5}, -1, 1, kFloat32)},
      {"b", uniform({7}, -1, 1, kFloat64)},
      {"c", from_vector<std::int64_t>({-5, 1LL << 40, 7}, {3})},
      {"scalar", uniform({}, -1, 1, kFloat64)},
      {"bf16", uniform({2, 3}, -1, 1, kFloat32).to(kBFloat16)},
      {"f16", uniform({4}, -1, 1, kFloat32).to(kHalf)},
      {"i32", from_vector<std::int32_t>({-3, 9}, {2})},
      {"u8", from_vector<std::uint8_t>({0, 200, 255}, {3})},
      {"bool", from_vector<bool>({true, false, true}, {3})},
      {"transposed", uniform({3, 4}, -1, 1, kFloat32).t()}};
  io::save_state_dict(tensors, path, {{"k", "v"}});
  const io::SafetensorsContents contents = io::read_safetensors(path);
  EXPECT_EQ(contents.metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  ASSERT_EQ(contents.tensors.size(), tensors.size());
  const std::map<std::string, std::string> dtypes = {{"a", "F32"},   {"b", "F64"},  {"c", "I64"},  {"scalar", "F64"},
                                                     {"bf16", "BF16"}, {"f16", "F16"}, {"i32", "I32"}, {"u8", "U8"},
                                                     {"bool", "BOOL"}, {"transposed", "F32"}};
  for (const auto& r : contents.tensors) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.dtype, dtypes.at(r.name));
    EXPECT_EQ(r.shape, tensors.at(r.name).sizes());
    EXPECT_TRUE(r.data == bytes_of(tensors.at(r.name)));
  }
}

TEST(Checkpoint, ParameterAndBufferOfTheSameNameAreRejected) {
  nn::Module m("Clash");
  m.register_parameter("x", uniform({2}, -1, 1));
  m.register_buffer("x", uniform({2}, -1, 1));
  EXPECT_CONTAINS(message_of<ValueError>([&] { io::state_dict(m); }), "'x'");
  TempDir dir;
  EXPECT_THROW(io::save(m, dir.file("clash.safetensors")), ValueError);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Checkpoint, LoadListsEveryMismatchAndLeavesTheModelUnchanged) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  auto saved = make_net();
  randomize(*saved);
  io::save(*saved, path);

  Arch other;
  other.fc_out = 5;      // fc.weight, fc.bias: wrong shape
  other.bn = false;      // bn.*: unexpected in the file
  other.conv_f64 = true; // conv.weight, conv.bias: wrong dtype
  other.extra = true;    // extra.*: missing in the file
  auto target = make_net(other);
  randomize(*target);
  const Snapshot before = snapshot(*target);

  const std::string msg = message_of<FormatError>([&] { io::load(*target, path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "(11 mismatches)");
  EXPECT_CONTAINS(msg, "'fc.weight': shape expected [5, 6], found [4, 6]");
  EXPECT_CONTAINS(msg, "'fc.bias': shape expected [5], found [4]");
  EXPECT_CONTAINS(msg, "'conv.weight': dtype expected F64, found F32");
  EXPECT_CONTAINS(msg, "'conv.bias': dtype expected F64, found F32");
  EXPECT_CONTAINS(msg, "missing in file: 'extra.weight' (F32 [2, 2])");
  EXPECT_CONTAINS(msg, "missing in file: 'extra.bias' (F32 [2])");
  for (const char* name : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) {
    EXPECT_CONTAINS(msg, std::string("unexpected in file: '") + name + "' (F32 [4])");
  }
  EXPECT_CONTAINS(msg, "unexpected in file: 'bn.num_batches_tracked' (I64 [])");
  expect_same(snapshot(*target), before);
}

TEST(Checkpoint, DtypeMinidlLacksIsAMismatch) {
  // A valid file whose tensor has the right shape but a dtype minidl has no tensors of.
  TempDir dir;
  const std::string path = dir.file("int16.safetensors");
  nn::Module m("One");
  m.register_parameter("w", uniform({3}, -1, 1));
  const Snapshot before = snapshot(m);
  io::write_safetensors(path, {io::TensorRecord{"w", "I16", {3}, Bytes(6, 0x3c)}}, {});
  const std::string msg = message_of<FormatError>([&] { io::load(m, path); });
  EXPECT_CONTAINS(msg, "(1 mismatch)");
  EXPECT_CONTAINS(msg, "'w': dtype expected F32, found I16");
  expect_same(snapshot(m), before);
}

TEST(Checkpoint, CorruptFilesAreFormatErrorsAndLeaveTheModelUnchanged) {
  TempDir dir;
  const std::string good = dir.file("good.safetensors");
  auto saved = make_net();
  randomize(*saved);
  io::save(*saved, good);
  const Bytes bytes = slurp(good);
  const std::size_t data_start = 8 + bytes[0] + (std::size_t{bytes[1]} << 8);

  std::vector<std::pair<std::string, Bytes>> cases;
  for (const std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{8}, data_start - 1, data_start,
                              bytes.size() / 2, bytes.size() - 1}) {
    cases.emplace_back("truncated to " + std::to_string(n), Bytes(bytes.begin(), bytes.begin() + n));
  }
  Bytes extended = bytes;
  extended.push_back(0);
  cases.emplace_back("one byte appended", extended);
  Bytes longer_header = bytes;
  longer_header[0] += 1;
  cases.emplace_back("header length + 1", longer_header);
  Bytes huge_header = bytes;
  huge_header[7] = 0x7f;
  cases.emplace_back("huge header length", huge_header);
  Bytes not_json = bytes;
  not_json[8] = 'x';
  cases.emplace_back("header not JSON", not_json);
  Bytes bad_dtype = bytes;
  const std::string header(bytes.begin() + 8, bytes.begin() + data_start);
  const std::size_t f32 = header.find("\"F32\"");
  ASSERT_NE(f32, std::string::npos);
  bad_dtype[8 + f32 + 2] = '6';  // "F62": no such dtype
  cases.emplace_back("unknown dtype", bad_dtype);

  for (const auto& [what, content] : cases) {
    SCOPED_TRACE(what);
    const std::string path = dir.file("bad.safetensors");
    spit(path, content);
    auto target = make_net();
    randomize(*target);
    const Snapshot before = snapshot(*target);
    const std::string msg = message_of<FormatError>([&] { io::load(*target, path); });
    EXPECT_CONTAINS(msg, path);
    expect_same(snapshot(*target), before);
  }
}

TEST(Checkpoint, MissingFileIsIOErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("absent.safetensors");
  auto net = make_net();
  const Snapshot before = snapshot(*net);
  EXPECT_CONTAINS(message_of<IOError>([&] { io::load(*net, path); }), path);
  expect_same(snapshot(*net), before);
}

TEST(Checkpoint, SaveIntoMissingDirectoryIsIOErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("no_such_dir/model.safetensors");
  const std::string msg = message_of<IOError>([&] { io::save(*make_net(), path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Checkpoint, FailedSaveKeepsTheOldFile) {
  TempDir dir;
  // The target is an existing directory: the final rename fails and the directory keeps its content.
  const std::string occupied = dir.file("occupied");
  fs::create_directory(occupied);
  spit(occupied + "/inside", {1, 2, 3});
  EXPECT_CONTAINS(message_of<IOError>([&] { io::save(*make_net(), occupied); }), occupied);
  EXPECT_EQ(slurp(occupied + "/inside"), (Bytes{1, 2, 3}));

  // An existing checkpoint survives saves that fail before or while writing.
  const std::string path = dir.file("model.safetensors");
  auto net = make_net();
  randomize(*net);
  io::save(*net, path);
  const Bytes old_bytes = slurp(path);
  nn::Module clash("Clash");
  clash.register_parameter("x", uniform({2}, -1, 1));
  clash.register_buffer("x", uniform({2}, -1, 1));
  EXPECT_THROW(io::save(clash, path), ValueError);
  EXPECT_THROW(io::save_state_dict({{"w", Tensor()}}, path), ValueError);
  EXPECT_EQ(slurp(path), old_bytes);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"model.safetensors", "occupied"}));  // no temporary files
}

// ---- RNG state ---------------------------------------------------------------------------------------------

TEST(RngState, RestoringReproducesTheSameNumbers) {
  rand({37});  // move away from any seeded start
  const RngState state = get_rng_state();
  const Tensor a = rand({1000});
  const Tensor b = randn({99}, kFloat64);
  set_rng_state(state);
  expect_identical(rand({1000}), a, "rand after set_rng_state");
  expect_identical(randn({99}, kFloat64), b, "randn after set_rng_state");
}

TEST(RngState, GetReturnsWhatSetStored) {
  const RngState saved = get_rng_state();
  std::mt19937_64 bits(std::random_device{}());
  RngState s = saved;
  s.philox_seed = bits();
  s.philox_offsets = {{0, bits()}, {3, std::numeric_limits<std::uint64_t>::max()}};
  set_rng_state(s);
  const RngState got = get_rng_state();
  EXPECT_EQ(got.cpu, s.cpu);
  EXPECT_EQ(got.philox_seed, s.philox_seed);
  EXPECT_EQ(got.philox_offsets, s.philox_offsets);
  set_rng_state(saved);
}

TEST(RngState, MalformedStateIsRejectedAndChangesNothing) {
  const RngState good = get_rng_state();
  const std::string& cpu = good.cpu;
  const std::size_t first_space = cpu.find(' ');
  const std::size_t last_space = cpu.rfind(' ');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"trailing space", cpu + " "},
      {"leading space", " " + cpu},
      {"double space", cpu.substr(0, first_space) + "  " + cpu.substr(first_space + 1)},
      {"last word missing", cpu.substr(0, last_space)},
      {"extra word", cpu + " 1"},
      {"negative word", "-1" + cpu.substr(first_space)},
      {"plus sign", "+1" + cpu.substr(first_space)},
      {"leading zero", "0" + cpu},
      {"word above 2^64", "18446744073709551616" + cpu.substr(first_space)},
      {"letters", "abc" + cpu.substr(first_space)},
  };
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    RngState bad = good;
    bad.cpu = text;
    EXPECT_CONTAINS(message_of<ValueError>([&] { set_rng_state(bad); }), "set_rng_state: field 'cpu'");
    EXPECT_EQ(get_rng_state().cpu, good.cpu);
  }
  RngState bad_device = good;
  bad_device.philox_seed = good.philox_seed + 1;
  bad_device.philox_offsets[-1] = 5;
  EXPECT_CONTAINS(message_of<ValueError>([&] { set_rng_state(bad_device); }), "-1");
  EXPECT_EQ(get_rng_state().philox_seed, good.philox_seed);
}

// ---- training state ----------------------------------------------------------------------------------------

std::uint64_t bits_of(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

TEST(TrainingState, RoundTripIsExact) {
  TempDir dir;
  const std::string path = dir.file("train.state");
  rand({5});
  io::TrainingState st;
  st.epoch = 7;
  st.optimizer = {{"lr", uniform({}, 0, 1, kFloat64)},
                  {"0.step", full({}, 12.0, kFloat64)},
                  {"0.exp_avg", uniform({3, 4}, -1, 1, kFloat32)},
                  {"1.momentum_buffer", uniform({5}, -1, 1, kFloat64)},
                  {"counts", from_vector<std::int64_t>({3, -(1LL << 50)}, {2})}};
  std::mt19937_64 bits(std::random_device{}());
  const double specials[] = {0.1, 1.0 / 3.0, -0.0, std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::epsilon()};
  for (std::size_t i = 0; i < std::size(specials); ++i) st.scheduler["special" + std::to_string(i)] = specials[i];
  for (int i = 0; i < 50; ++i) {  // random bit patterns cover every exponent and mantissa
    double d;
    do {
      const std::uint64_t u = bits();
      std::memcpy(&d, &u, sizeof d);
    } while (std::isnan(d));
    st.scheduler["random" + std::to_string(i)] = d;
  }
  st.scheduler["nan"] = std::numeric_limits<double>::quiet_NaN();
  st.rng = get_rng_state();
  st.rng.philox_seed = bits();
  st.rng.philox_offsets = {{0, bits()}, {1, 0}, {7, std::numeric_limits<std::uint64_t>::max()}};
  st.extra = {{"loader.seed", "42"}, {"note", "é \"x\""}, {"", "empty key"}};

  io::save_training_state(path, st);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"train.state"});
  const io::TrainingState got = io::load_training_state(path);

  EXPECT_EQ(got.epoch, st.epoch);
  ASSERT_EQ(got.optimizer.size(), st.optimizer.size());
  for (const auto& [name, t] : st.optimizer) {
    ASSERT_EQ(got.optimizer.count(name), 1u) << name;
    expect_identical(got.optimizer.at(name), t, "optimizer " + name);
  }
  ASSERT_EQ(got.scheduler.size(), st.scheduler.size());
  for (const auto& [name, value] : st.scheduler) {
    ASSERT_EQ(got.scheduler.count(name), 1u) << name;
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(got.scheduler.at(name))) << name;
    } else {
      EXPECT_EQ(bits_of(got.scheduler.at(name)), bits_of(value)) << name << " = " << value;
    }
  }
  EXPECT_EQ(got.rng.cpu, st.rng.cpu);
  EXPECT_EQ(got.rng.philox_seed, st.rng.philox_seed);
  EXPECT_EQ(got.rng.philox_offsets, st.rng.philox_offsets);
  EXPECT_EQ(got.extra, st.extra);

  // Optimizer tensors are ordinary safetensors entries under "optimizer.".
  for (const auto& r : io::read_safetensors(path).tensors) EXPECT_EQ(r.name.rfind("optimizer.", 0), 0u) << r.name;

  // The restored generator state draws what the saved one would have.
  const Tensor expected = rand({500});
  const RngState after = get_rng_state();
  RngState restored = got.rng;
  restored.philox_seed = after.philox_seed;
  restored.philox_offsets = after.philox_offsets;
  set_rng_state(restored);
  expect_identical(rand({500}), expected, "rand after restoring the file's CPU state");
}

// A valid training-state metadata map, for the rejection tests to break one key at a time.
std::map<std::string, std::string> valid_state_metadata() {
  return {{"format", "minidl.training_state.v1"},
          {"epoch", "2"},
          {"rng.cpu", get_rng_state().cpu},
          {"rng.philox_seed", "5489"}};
}

TEST(TrainingState, InvalidFilesAreFormatErrors) {
  TempDir dir;
  const std::string path = dir.file("bad.state");
  const io::TensorRecord f32{"optimizer.0.exp_avg", "F32", {1}, Bytes(4, 0x3f)};

  io::write_safetensors(path, {f32}, valid_state_metadata());
  EXPECT_EQ(io::load_training_state(path).epoch, 2);  // the baseline is valid

  struct Case {
    std::string what, key, value, expected_text;
  };
  const std::vector<Case> cases = {
      {"not a training state", "format", "", "'format'"},
      {"negative epoch", "epoch", "-1", "'epoch'"},
      {"epoch with junk", "epoch", "3x", "'epoch'"},
      {"epoch with spaces", "epoch", " 3", "'epoch'"},
      {"seed out of range", "rng.philox_seed", "18446744073709551616", "'rng.philox_seed'"},
      {"bad cpu state", "rng.cpu", "1 2 3", "'rng.cpu'"},
      {"bad offset device", "rng.philox_offset.x", "1", "'rng.philox_offset.x'"},
      {"negative offset device", "rng.philox_offset.-2", "1", "'rng.philox_offset.-2'"},
      {"bad offset", "rng.philox_offset.0", "-5", "'rng.philox_offset.0'"},
      {"bad scheduler value", "scheduler.lr", "0.1.2", "'scheduler.lr'"},
      {"unknown key", "surprise", "1", "'surprise'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto metadata = valid_state_metadata();
    metadata[c.key] = c.value;
    io::write_safetensors(path, {f32}, metadata);
    const std::string msg = message_of<FormatError>([&] { io::load_training_state(path); });
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, c.expected_text);
  }
  for (const char* required : {"format", "epoch", "rng.cpu", "rng.philox_seed"}) {
    SCOPED_TRACE(std::string("without ") + required);
    auto metadata = valid_state_metadata();
    metadata.erase(required);
    io::write_safetensors(path, {f32}, metadata);
    EXPECT_CONTAINS(message_of<FormatError>([&] { io::load_training_state(path); }), required);
  }
  io::write_safetensors(path, {io::TensorRecord{"weight", "F32", {1}, Bytes(4, 0)}}, valid_state_metadata());
  EXPECT_CONTAINS(message_of<FormatError>([&] { io::load_training_state(path); }), "'weight'");
  // A safetensors dtype minidl has no tensor type for (F16 is one now; I16 is not).
  io::write_safetensors(path, {io::TensorRecord{"optimizer.h", "I16", {1}, Bytes(2, 0)}}, valid_state_metadata());
  EXPECT_CONTAINS(message_of<FormatError>([&] { io::load_training_state(path); }), "I16");
  spit(path, {1, 2, 3});
  EXPECT_THROW(io::load_training_state(path), FormatError);
}

TEST(TrainingState, InvalidStateIsNotWritten) {
  TempDir dir;
  const std::string path = dir.file("train.state");
  io::TrainingState st;
  st.rng = get_rng_state();
  st.epoch = -1;
  EXPECT_CONTAINS(message_of<ValueError>([&] { io::save_training_state(path, st); }), "'epoch'");
  st.epoch = 0;
  st.rng.cpu = "1 2 3";
  EXPECT_CONTAINS(message_of<ValueError>([&] { io::save_training_state(path, st); }), "'rng.cpu'");
  st.rng = get_rng_state();
  st.rng.philox_offsets[-3] = 1;
  EXPECT_THROW(io::save_training_state(path, st), ValueError);
  st.rng = get_rng_state();
  st.optimizer["0.exp_avg"] = Tensor();
  EXPECT_THROW(io::save_training_state(path, st), ValueError);
  EXPECT_TRUE(dir.entries().empty());
}

// ---- resume ------------------------------------------------------------------------------------------------

struct Trainee {
  std::shared_ptr<nn::Module> model = std::make_shared<nn::Module>("Trainee");
  std::shared_ptr<nn::LinearImpl> fc = model->register_module("fc", std::make_shared<nn::LinearImpl>(6, 4));
  std::shared_ptr<nn::BatchNorm1dImpl> bn =
      model->register_module("bn", std::make_shared<nn::BatchNorm1dImpl>(nn::BatchNormOptions(4)));
  optim::Adam opt{model->parameters(), optim::AdamOptions(0.01)};

  // Each step draws its batch from the global generator, so the RNG state matters for the result.
  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      const Tensor x = randn({8, 6});
      const Tensor y = rand({8, 4});
      opt.zero_grad();
      const Tensor diff = bn->forward(fc->forward(x)) - y;
      (diff * diff).mean().backward();
      opt.step();
    }
  }
};

TEST(Checkpoint, ResumeContinuesExactly) {
  TempDir dir;
  const std::string model_path = dir.file("model.safetensors");
  const std::string state_path = dir.file("model.state");
  Trainee run;
  run.train(2);
  io::save(*run.model, model_path);
  io::TrainingState st;
  st.epoch = 1;
  st.optimizer = run.opt.state_dict();
  st.rng = get_rng_state();
  io::save_training_state(state_path, st);
  run.train(3);
  const Snapshot uninterrupted = snapshot(*run.model);

  randn({11});  // the resumed run starts from a different generator state and weights
  Trainee resumed;
  io::load(*resumed.model, model_path);
  const io::TrainingState loaded = io::load_training_state(state_path);
  resumed.opt.load_state_dict(loaded.optimizer);
  set_rng_state(loaded.rng);
  EXPECT_EQ(loaded.epoch, 1);
  resumed.train(3);
  expect_same(snapshot(*resumed.model), uninterrupted);
}

// ---- CPU <-> CUDA ------------------------------------------------------------------------------------------

TEST(CheckpointGpu, SaveFromCudaLoadIntoCpu) {
  MINIDL_REQUIRE_GPU();
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  auto saved = make_net();
  randomize(*saved);
  const Snapshot expected = snapshot(*saved);
  saved->to(Device(kCUDA));
  io::save(*saved, path);

  auto target = make_net();
  io::load(*target, path);
  expect_same(snapshot(*target), expected);
  for (const auto& [name, t] : io::state_dict(*target)) EXPECT_TRUE(t.device().is_cpu()) << name;
}

TEST(CheckpointGpu, SaveFromCpuLoadIntoCuda) {
  MINIDL_REQUIRE_GPU();
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  auto saved = make_net();
  randomize(*saved);
  io::save(*saved, path);

  auto target = make_net();
  target->to(Device(kCUDA));
  io::load(*target, path);
  for (const auto& [name, t] : io::state_dict(*target)) EXPECT_TRUE(t.device().is_cuda()) << name;
  expect_same(snapshot(*target), snapshot(*saved));

  // A failed load into a CUDA model changes nothing either.
  auto wrong = make_net(Arch{5});
  wrong->to(Device(kCUDA));
  const Snapshot before = snapshot(*wrong);
  EXPECT_THROW(io::load(*wrong, path), FormatError);
  expect_same(snapshot(*wrong), before);
}

TEST(CheckpointGpu, RngStateReproducesCudaRandomNumbers) {
  MINIDL_REQUIRE_GPU();
  const TensorOptions on_gpu = TensorOptions().device(Device(kCUDA));
  rand({3}, on_gpu);
  const RngState state = get_rng_state();
  const Tensor a = rand({1000}, on_gpu);
  const Tensor b = randn({77}, on_gpu);
  set_rng_state(state);
  expect_identical(rand({1000}, on_gpu), a, "cuda rand after set_rng_state");
  expect_identical(randn({77}, on_gpu), b, "cuda randn after set_rng_state");
}

}  // namespace
