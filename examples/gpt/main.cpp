// gpt_train: trains nanoGPT's GPT on a text's characters (tiny shakespeare by default) or on random tokens, on
// the CPU or a GPU, or on both (--compare) to measure the speedup; evaluates, writes metrics and checkpoints,
// and samples text. Exit status: 0 success, 1 runtime error, 2 command-line error, 130 interrupted by Ctrl-C
// (after the current step; the last checkpoint stays intact).
#include <minidl/minidl.h>
#include <minidl/run_main.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "data.h"
#include "device_choice.h"
#include "interrupt.h"
#include "options.h"
#include "reference_dump.h"
#include "sampling.h"
#include "token_metrics.h"
#include "token_run_summary.h"
#include "trainer.h"

using minidl::Device;

namespace {

using gpt::Options;

/// Random-token streams long enough for many distinct windows of the context.
constexpr std::int64_t kSyntheticTokens = std::int64_t{1} << 22;

std::shared_ptr<const gpt::TokenData> load_data(const Options& o, const gpt::Hyper& h) {
  if (h.synthetic_vocab > 0) {
    auto d = std::make_shared<gpt::TokenData>(
        gpt::TokenData::synthetic(h.synthetic_vocab, std::max(kSyntheticTokens, 16 * (h.block_size + 1)), o.seed));
    spdlog::info("data: random tokens of a vocabulary of {}", d->vocab_size());
    return d;
  }
  const std::string path = o.data.empty() ? gpt::default_data_file() : o.data;
  auto d = std::make_shared<gpt::TokenData>(gpt::TokenData::from_text_file(path, h.block_size));
  spdlog::info("data: {} ({} characters in the vocabulary, {} train and {} val tokens)", path, d->vocab_size(),
               d->tokens(gpt::Split::Train).size(), d->tokens(gpt::Split::Val).size());
  return d;
}

examples::TokenRunSummary run(const Options& o, const gpt::Hyper& h, Device device,
                              const std::shared_ptr<const gpt::TokenData>& data, bool sample) {
  gpt::TrainConfig c;
  c.device = device;
  c.hyper = h;
  c.seed = o.seed;
  c.cuda_graph = !o.no_graph;
  c.progress = !o.no_progress;
  c.stop_requested = examples::interrupt_requested;
  c.amp = examples::parse_amp(o.amp);
  gpt::Trainer trainer(c, data);
  std::string precision = " (float32)";
  if (trainer.grad_scaler()) {
    precision = fmt::format(" (autocast to float16, float32 parameters, GradScaler from scale {})",
                            trainer.grad_scaler()->get_scale());
  } else if (c.amp) {
    precision = " (autocast to bfloat16, float32 parameters)";
  }
  spdlog::info("model on {}: {} ({:.2f}M parameters), --amp {}{}", device.str(), trainer.model()->config().str(),
               static_cast<double>(trainer.model()->num_params()) / 1e6, o.amp, precision);
  if (!o.resume.empty()) {
    trainer.resume(o.resume);
    spdlog::info("resumed from {} at iteration {}", o.resume, trainer.iter());
  }
  std::unique_ptr<examples::TokenMetricsWriter> metrics;
  if (!o.metrics.empty()) {
    metrics = std::make_unique<examples::TokenMetricsWriter>(examples::metrics_path(o.metrics, o.compare, device),
                                                             !o.resume.empty());
  }

  examples::TokenRunSummary summary{device};
  summary.tokens_per_iter = h.grad_accum * h.batch_size * h.block_size;
  const std::int64_t start = trainer.iter();
  double train_seconds = 0;
  for (;;) {
    const std::int64_t it = trainer.iter();
    if (it % h.eval_every == 0 || it >= h.iters) {
      const double train_loss = trainer.evaluate(gpt::Split::Train), val_loss = trainer.evaluate(gpt::Split::Val);
      spdlog::info("iter {} on {}: train loss {:.4f}, val loss {:.4f} ({:.1f} s of training)", it, device.str(),
                   train_loss, val_loss, train_seconds);
      summary.last_val = val_loss;
      if (metrics) metrics->val(it, val_loss, train_seconds);
      if (!o.save.empty() && it > start) trainer.save(o.save);
    }
    if (it >= h.iters) break;
    const std::int64_t next = std::min(h.iters, (it / h.eval_every + 1) * h.eval_every);
    const gpt::IntervalStats s = trainer.train(next);
    train_seconds += s.seconds;
    const double tokens = static_cast<double>(s.iters * summary.tokens_per_iter);
    spdlog::info("iters {}-{} on {}: loss {:.4f}, {:.2f} ms/iter, {:.0f} tokens/s{}", s.first, next, device.str(),
                 s.loss, 1e3 * s.seconds / static_cast<double>(s.iters), tokens / s.seconds,
                 s.timing.one_time_steps > 0 ? fmt::format(" ({:.2f} s of it one-time work in {} step(s))",
                                                           s.timing.one_time_seconds, s.timing.one_time_steps)
                                             : std::string());
    if (metrics) {
      metrics->train(next, s.loss, 1e3 * s.seconds / static_cast<double>(s.iters), tokens / s.seconds, train_seconds);
    }
    summary.add(s.iters, s.timing);
  }
  if (sample && o.sample > 0) {
    gpt::SampleOptions so;
    so.max_new_tokens = o.sample;
    so.temperature = o.temperature;
    so.top_k = o.top_k;
    const std::vector<std::int64_t> prompt = data->encode(o.prompt);
    const std::vector<std::int64_t> text = gpt::generate(trainer.model(), prompt, so);
    std::printf("%s\n", data->decode(text).c_str());
  }
  return summary;
}

int run_program(int argc, char** argv) {
  CLI::App app{"gpt_train: train nanoGPT's GPT with minidl"};
  Options o;
  gpt::add_options(app, o);
  try {
    app.parse(argc, argv);
    gpt::check_options(o);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    if (o.threads > 0) minidl::set_num_threads(o.threads);
    examples::install_interrupt_handler();
    const gpt::Hyper h = gpt::resolve(o);
    const auto data = load_data(o, h);
    if (!o.dump_reference.empty()) {
      gpt::TrainConfig c;
      c.device = examples::pick_device(o.device);
      c.hyper = h;
      c.seed = o.seed;
      gpt::dump_reference(c, data, o.dump_reference);
      spdlog::info("wrote {} and {}", o.dump_reference, gpt::reference_path(o.dump_reference));
      return 0;
    }
    std::vector<examples::TokenRunSummary> runs;
    const std::vector<Device> devices = examples::training_devices(o.device, o.compare);
    for (std::size_t i = 0; i < devices.size(); ++i) {
      runs.push_back(run(o, h, devices[i], data, /*sample=*/i + 1 == devices.size()));
    }
    examples::print_token_run_summary(runs, "warm-up steps and the CUDA-graph capture");
  } catch (const gpt::Interrupted& e) {
    std::fprintf(stderr, "gpt_train: %s\n", e.what());
    return 130;  // 128 + SIGINT, as a shell reports a process killed by Ctrl-C
  } catch (const minidl::OutOfMemoryError& e) {
    minidl::print_error("gpt_train", e);
    std::fprintf(stderr, "Try a smaller --batch-size or --block-size.\n");
    return 1;
  }
  return 0;
}

}  // namespace

// Every other error: its type and message on stderr, exit status 1 (minidl::run_main).
int main(int argc, char** argv) {
  return minidl::run_main("gpt_train", [&] { return run_program(argc, argv); });
}
