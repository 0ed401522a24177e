#include "minidl/io/checkpoint.h"

#include <charconv>
#include <cstring>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "minidl/autograd.h"
#include "minidl/io/safetensors.h"

namespace minidl::io {
namespace {

// safetensors stores little-endian bytes; tensors are copied to and from the file as raw memory.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint I/O copies raw little-endian bytes");

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

const std::string kOptimizerPrefix = "optimizer.";
const std::string kSchedulerPrefix = "scheduler.";
const std::string kExtraPrefix = "extra.";
const std::string kOffsetPrefix = "rng.philox_offset.";
const std::string kFormatKey = "format";
const std::string kFormatValue = "minidl.training_state.v1";
const std::string kEpochKey = "epoch";
const std::string kRngCpuKey = "rng.cpu";
const std::string kRngSeedKey = "rng.philox_seed";
constexpr const char* kU64Text = "a decimal integer in [0, 2^64)";

std::optional<DType> dtype_of_file(const std::string& name) {
#define MINIDL_DTYPE_FROM_FILE(T, enum_name, str, cat, rank, file) \
  if (name == file) return DType::enum_name;
  MINIDL_FORALL_DTYPES(MINIDL_DTYPE_FROM_FILE)
#undef MINIDL_DTYPE_FROM_FILE
  return std::nullopt;
}

// Names read from a file may be arbitrarily long; messages show a bounded prefix.
std::string quoted(const std::string& s) { return "'" + (s.size() > 80 ? s.substr(0, 80) + "..." : s) + "'"; }

TensorRecord to_record(const std::string& name, const Tensor& t, const std::string& op) {
  MINIDL_CHECK(t.defined(), ValueError, op, ": tensor ", quoted(name), " is undefined");
  const Tensor host = t.detach().cpu().contiguous();  // bytes in row-major order, whatever the view
  TensorRecord r;
  r.name = name;
  r.dtype = safetensors_name(host.dtype());
  r.shape = host.sizes();
  const auto* bytes = static_cast<const std::uint8_t*>(host.data_ptr());
  r.data.assign(bytes, bytes + host.nbytes());
  return r;
}

// The caller has checked that r.dtype names a minidl dtype (dtype_of_file).
Tensor from_record(const TensorRecord& r) {
  Tensor t = empty(r.shape, TensorOptions(*dtype_of_file(r.dtype)));
  if (!r.data.empty()) std::memcpy(t.data_ptr(), r.data.data(), r.data.size());
  return t;
}

void write_tensors(const NamedTensors& tensors, const std::string& path,
                   const std::map<std::string, std::string>& metadata, const std::string& op) {
  std::vector<TensorRecord> records;
  records.reserve(tensors.size());
  for (const auto& [name, t] : tensors) records.push_back(to_record(name, t, op));
  write_safetensors(path, records, metadata);
}

NamedTensors named_tensors(const nn::Module& module) {
  NamedTensors out = module.named_parameters().pairs();
  NamedTensors buffers = module.named_buffers().pairs();
  out.insert(out.end(), std::make_move_iterator(buffers.begin()), std::make_move_iterator(buffers.end()));
  return out;
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

// ---- scalar text in __metadata__: locale-independent, exact, and nothing else accepted ----------------------

template <class T>
std::string number_text(T value) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);  // doubles: shortest exact round trip
  MINIDL_CHECK(ec == std::errc(), ValueError, "checkpoint: cannot format number ", value);
  return std::string(buf, end);
}

template <class T>
std::optional<T> parse_number(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

template <class T>
T metadata_number(const std::string& key, const std::string& text, const char* expected, const std::string& prefix) {
  const std::optional<T> value = parse_number<T>(text);
  MINIDL_CHECK(value, FormatError, prefix, "__metadata__ key ", quoted(key), ": expected ", expected, ", found ",
               quoted(text));
  return *value;
}

const std::string& required(const std::map<std::string, std::string>& metadata, const std::string& key,
                            const std::string& prefix) {
  const auto it = metadata.find(key);
  MINIDL_CHECK(it != metadata.end(), FormatError, prefix, "__metadata__: expected key ", quoted(key), ", found none");
  return it->second;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

std::map<std::string, Tensor> state_dict(const nn::Module& module) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : named_tensors(module)) {
    MINIDL_CHECK(out.emplace(name, t).second, ValueError, "state_dict: module ", quoted(module.name()),
                 ": expected unique parameter and buffer names, found ", quoted(name), " twice");
  }
  return out;
}

void save_state_dict(const std::map<std::string, Tensor>& tensors, const std::string& path,
                     const std::map<std::string, std::string>& metadata) {
  write_tensors(NamedTensors(tensors.begin(), tensors.end()), path, metadata, "save_state_dict('" + path + "')");
}

void save(const nn::Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  write_tensors(named_tensors(module), path, metadata, "save('" + path + "')");
}

void load(nn::Module& module, const std::string& path) {
  const SafetensorsContents contents = read_safetensors(path);
  std::map<std::string, const TensorRecord*> in_file;
  for (const TensorRecord& r : contents.tensors) in_file.emplace(r.name, &r);

  std::vector<std::string> problems;
  std::vector<std::pair<Tensor, const TensorRecord*>> matched;
  std::set<std::string> expected;
  for (const auto& [name, t] : named_tensors(module)) {
    expected.insert(name);
    const std::string want_dtype = safetensors_name(t.dtype());
    const auto it = in_file.find(name);
    if (it == in_file.end()) {
      problems.push_back(
          detail::str("missing in file: ", quoted(name), " (", want_dtype, " ", shape_str(t.sizes()), ")"));
      continue;
    }
    const TensorRecord& r = *it->second;
    const bool dtype_ok = r.dtype == want_dtype;
    const bool shape_ok = r.shape == t.sizes();
    if (!dtype_ok) problems.push_back(detail::str(quoted(name), ": dtype expected ", want_dtype, ", found ", r.dtype));
    if (!shape_ok) {
      problems.push_back(detail::str(quoted(name), ": shape expected ", shape_str(t.sizes()), ", found ",
                                     shape_str(r.shape)));
    }
    if (dtype_ok && shape_ok) matched.emplace_back(t, &r);
  }
  for (const TensorRecord& r : contents.tensors) {
    if (expected.count(r.name) == 0)
      problems.push_back("unexpected in file: " + quoted(r.name) + " (" + r.dtype + " " + shape_str(r.shape) + ")");
  }
  MINIDL_CHECK(problems.empty(), FormatError, "load: checkpoint '", path, "' does not match module ",
               quoted(module.name()), " (", problems.size(), " mismatch", problems.size() == 1 ? "" : "es", "): ",
               join(problems, "; "));

  // Every source is built on its target's device first: an allocation failure then leaves the model as it was.
  std::vector<Tensor> sources;
  sources.reserve(matched.size());
  for (const auto& [target, record] : matched) sources.push_back(from_record(*record).to(target.device()));
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < matched.size(); ++i) matched[i].first.copy_(sources[i]);
}

void save_training_state(const std::string& path, const TrainingState& state) {
  const std::string op = "save_training_state('" + path + "')";
  MINIDL_CHECK(state.epoch >= 0, ValueError, op, ": field 'epoch': expected >= 0, found ", state.epoch);
  // Refusing here what load_training_state() would refuse keeps unreadable files from being written.
  MINIDL_CHECK(parse_cpu_engine_state(state.rng.cpu), ValueError, op, ": field 'rng.cpu': ",
               cpu_engine_state_mismatch(state.rng.cpu));

  std::map<std::string, std::string> metadata{{kFormatKey, kFormatValue},
                                              {kEpochKey, number_text(state.epoch)},
                                              {kRngCpuKey, state.rng.cpu},
                                              {kRngSeedKey, number_text(state.rng.philox_seed)}};
  for (const auto& [device, offset] : state.rng.philox_offsets) {
    MINIDL_CHECK(device >= 0, ValueError, op, ": field 'rng.philox_offsets': expected device indices >= 0, found ",
                 device);
    metadata.emplace(kOffsetPrefix + number_text(device), number_text(offset));
  }
  for (const auto& [name, value] : state.scheduler) metadata.emplace(kSchedulerPrefix + name, number_text(value));
  for (const auto& [key, value] : state.extra) metadata.emplace(kExtraPrefix + key, value);

  NamedTensors tensors;
  for (const auto& [name, t] : state.optimizer) tensors.emplace_back(kOptimizerPrefix + name, t);
  write_tensors(tensors, path, metadata, op);
}

TrainingState load_training_state(const std::string& path) {
  const SafetensorsContents contents = read_safetensors(path);
  const std::string prefix = "load_training_state: file '" + path + "': ";
  const std::map<std::string, std::string>& metadata = contents.metadata;

  const auto format = metadata.find(kFormatKey);
  MINIDL_CHECK(format != metadata.end() && format->second == kFormatValue, FormatError, prefix, "__metadata__ key ",
               quoted(kFormatKey), ": expected ", quoted(kFormatValue), " (a training state), found ",
               format == metadata.end() ? std::string("no such key") : quoted(format->second));

  TrainingState state;
  state.epoch = metadata_number<std::int64_t>(kEpochKey, required(metadata, kEpochKey, prefix),
                                              "a decimal integer >= 0", prefix);
  MINIDL_CHECK(state.epoch >= 0, FormatError, prefix, "__metadata__ key ", quoted(kEpochKey),
               ": expected a decimal integer >= 0, found ", state.epoch);
  state.rng.philox_seed = metadata_number<std::uint64_t>(kRngSeedKey, required(metadata, kRngSeedKey, prefix),
                                                         kU64Text, prefix);
  state.rng.cpu = required(metadata, kRngCpuKey, prefix);
  MINIDL_CHECK(parse_cpu_engine_state(state.rng.cpu), FormatError, prefix, "__metadata__ key ", quoted(kRngCpuKey),
               ": ", cpu_engine_state_mismatch(state.rng.cpu));

  for (const auto& [key, value] : metadata) {
    if (key == kFormatKey || key == kEpochKey || key == kRngCpuKey || key == kRngSeedKey) continue;
    if (starts_with(key, kOffsetPrefix)) {
      const std::optional<int> device = parse_number<int>(key.substr(kOffsetPrefix.size()));
      MINIDL_CHECK(device && *device >= 0, FormatError, prefix, "__metadata__ key ", quoted(key),
                   ": expected a device index >= 0 after ", quoted(kOffsetPrefix));
      state.rng.philox_offsets[*device] = metadata_number<std::uint64_t>(key, value, kU64Text, prefix);
    } else if (starts_with(key, kSchedulerPrefix)) {
      state.scheduler[key.substr(kSchedulerPrefix.size())] =
          metadata_number<double>(key, value, "a decimal floating-point number", prefix);
    } else if (starts_with(key, kExtraPrefix)) {
      state.extra[key.substr(kExtraPrefix.size())] = value;
    } else {
      throw FormatError(detail::str(prefix, "__metadata__: expected keys ", kFormatKey, ", ", kEpochKey, ", ",
                                    kRngCpuKey, ", ", kRngSeedKey, ", ", kOffsetPrefix, "<device>, ", kSchedulerPrefix,
                                    "<name> or ", kExtraPrefix, "<key>, found ", quoted(key)));
    }
  }

  for (const TensorRecord& r : contents.tensors) {
    MINIDL_CHECK(starts_with(r.name, kOptimizerPrefix), FormatError, prefix, "tensor ", quoted(r.name),
                 ": expected a name starting with ", quoted(kOptimizerPrefix));
    MINIDL_CHECK(dtype_of_file(r.dtype), FormatError, prefix, "tensor ", quoted(r.name),
                 " field 'dtype': expected a dtype minidl has (F32, F64, BF16, F16, I64, I32, U8, BOOL), found ",
                 r.dtype);
    state.optimizer[r.name.substr(kOptimizerPrefix.size())] = from_record(r);
  }
  return state;
}

}  // namespace minidl::io
