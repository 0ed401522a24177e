// char_lstm: trains a 2-layer LSTM character language model on tiny shakespeare (or --data) with truncated
// backpropagation through time, on the CPU or a GPU, or on both (--compare) to measure the speedup; validates,
// writes metrics and checkpoints, and samples text. Exit status: 0 success, 1 runtime error, 2 command-line
// error, 130 interrupted by Ctrl-C (after the current step; the last checkpoint stays intact).
#include <minidl/minidl.h>
#include <minidl/run_main.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "device_choice.h"
#include "interrupt.h"
#include "options.h"
#include "reference_dump.h"
#include "sampling.h"
#include "text_tokens.h"
#include "token_metrics.h"
#include "token_run_summary.h"
#include "trainer.h"

using minidl::Device;

namespace {

using char_lstm::Options;

std::shared_ptr<const examples::TokenData> load_data(const Options& o) {
  const std::string path = o.data.empty() ? char_lstm::default_data_file() : o.data;
  auto d = std::make_shared<examples::TokenData>(examples::TokenData::from_text_file(path, o.hyper.seq_len));
  spdlog::info("data: {} ({} characters in the vocabulary, {} train and {} val characters)", path, d->vocab_size(),
               d->tokens(examples::Split::Train).size(), d->tokens(examples::Split::Val).size());
  return d;
}

examples::TokenRunSummary run(const Options& o, const char_lstm::Hyper& h, Device device,
                              const std::shared_ptr<const examples::TokenData>& data, bool sample) {
  char_lstm::TrainConfig c;
  c.device = device;
  c.hyper = h;
  c.seed = o.seed;
  c.progress = !o.no_progress;
  c.stop_requested = examples::interrupt_requested;
  char_lstm::Trainer trainer(c, data);
  spdlog::info("model on {}: {} ({:.2f}M parameters); {} streams of {} characters, {} batches of {} per epoch",
               device.str(), trainer.model()->config().str(), static_cast<double>(trainer.model()->num_params()) / 1e6,
               h.batch_size, trainer.train_streams().stream_length(), trainer.train_streams().batches(), h.seq_len);
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
  summary.tokens_per_iter = h.batch_size * h.seq_len;
  const std::int64_t start = trainer.iter();
  double train_seconds = 0;
  for (;;) {
    const std::int64_t it = trainer.iter();
    if (it % h.eval_every == 0 || it >= h.iters) {
      const double val_loss = trainer.evaluate();
      spdlog::info("iter {} on {}: val loss {:.4f} per character ({:.3f} bits; {:.1f} s of training)", it, device.str(),
                   val_loss, val_loss / std::log(2.0), train_seconds);
      summary.last_val = val_loss;
      if (metrics) metrics->val(it, val_loss, train_seconds);
      if (!o.save.empty() && it > start) trainer.save(o.save);
    }
    if (it >= h.iters) break;
    const std::int64_t next = std::min(h.iters, (it / h.eval_every + 1) * h.eval_every);
    const char_lstm::IntervalStats s = trainer.train(next);
    train_seconds += s.seconds;
    const double tokens = static_cast<double>(s.iters * summary.tokens_per_iter);
    spdlog::info("iters {}-{} on {}: loss {:.4f}, {:.2f} ms/iter, {:.0f} characters/s", s.first, next, device.str(),
                 s.loss, 1e3 * s.seconds / static_cast<double>(s.iters), tokens / s.seconds);
    if (metrics) {
      metrics->train(next, s.loss, 1e3 * s.seconds / static_cast<double>(s.iters), tokens / s.seconds, train_seconds);
    }
    summary.add(s.iters, s.timing);
  }
  if (sample && o.sample > 0) {
    const std::vector<std::int64_t> prompt = data->encode(o.prompt);
    std::printf("%s\n", data->decode(char_lstm::generate(trainer.model(), prompt, o.sample, o.temperature)).c_str());
  }
  return summary;
}

int run_program(int argc, char** argv) {
  CLI::App app{"char_lstm: train an LSTM character language model with minidl"};
  Options o;
  char_lstm::add_options(app, o);
  try {
    app.parse(argc, argv);
    char_lstm::check_options(o);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    spdlog::set_level(spdlog::level::from_str(o.log_level));
    if (o.threads > 0) minidl::set_num_threads(o.threads);
    examples::install_interrupt_handler();
    const auto data = load_data(o);
    char_lstm::Hyper h = o.hyper;
    // The streams' length decides an epoch; the trainer checks them again with its errors.
    const char_lstm::TokenStreams streams(data->tokens(examples::Split::Train), h.batch_size, h.seq_len,
                                          "the training split");
    h.iters = char_lstm::total_iters(o, streams.batches());
    if (!o.dump_reference.empty()) {
      char_lstm::TrainConfig c;
      c.device = examples::pick_device(o.device);
      c.hyper = h;
      c.seed = o.seed;
      char_lstm::dump_reference(c, data, o.dump_reference);
      spdlog::info("wrote {} and {}", o.dump_reference, char_lstm::reference_path(o.dump_reference));
      return 0;
    }
    std::vector<examples::TokenRunSummary> runs;
    const std::vector<Device> devices = examples::training_devices(o.device, o.compare);
    for (std::size_t i = 0; i < devices.size(); ++i) {
      runs.push_back(run(o, h, devices[i], data, /*sample=*/i + 1 == devices.size()));
    }
    examples::print_token_run_summary(runs, "the first step");
  } catch (const char_lstm::Interrupted& e) {
    std::fprintf(stderr, "char_lstm: %s\n", e.what());
    return 130;  // 128 + SIGINT, as a shell reports a process killed by Ctrl-C
  } catch (const minidl::OutOfMemoryError& e) {
    minidl::print_error("char_lstm", e);
    std::fprintf(stderr, "Try a smaller --batch-size or --seq-len.\n");
    return 1;
  }
  return 0;
}

}  // namespace

// Every other error: its type and message on stderr, exit status 1 (minidl::run_main).
int main(int argc, char** argv) {
  return minidl::run_main("char_lstm", [&] { return run_program(argc, argv); });
}
