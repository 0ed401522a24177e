// examples/dcgan (dcgan): the PNG encoder (decoded here with zlib, every pixel compared, signature and CRCs
// checked), the sample grid, the model's parameter names, shapes and DCGAN initialisation, training steps that
// keep the losses finite and move every parameter, bitwise resume on the CPU, the GPU's step against the CPU's
// (skips without a GPU), and the command line (exit statuses, the PNG and metrics files).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "data.h"
#include "metrics.h"
#include "minidl/io/safetensors.h"
#include "model.h"
#include "png.h"
#include "sample_grid.h"
#include "test_util.h"
#include "trainer.h"

#ifndef DCGAN_BINARY
#error "tests/CMakeLists.txt passes the path of the built dcgan as DCGAN_BINARY"
#endif

namespace fs = std::filesystem;
using minidl::Tensor;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("minidl_dcgan_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::uint32_t u32_be(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) |
         std::uint32_t{b[at + 3]};
}

struct Chunk {
  std::string type;
  std::vector<std::uint8_t> data;
};

/// The chunks after the signature, each CRC checked against zlib's crc32 of its type and data.
std::vector<Chunk> read_chunks(const std::vector<std::uint8_t>& png) {
  std::vector<Chunk> chunks;
  std::size_t at = 8;
  while (at < png.size()) {
    EXPECT_LE(at + 12, png.size()) << "truncated chunk header";
    if (at + 12 > png.size()) break;
    const std::uint32_t length = u32_be(png, at);
    EXPECT_LE(at + 12 + length, png.size()) << "truncated chunk";
    if (at + 12 + length > png.size()) break;
    Chunk c{std::string(png.begin() + at + 4, png.begin() + at + 8),
            std::vector<std::uint8_t>(png.begin() + at + 8, png.begin() + at + 8 + length)};
    const uLong crc = crc32(crc32(0L, Z_NULL, 0), png.data() + at + 4, 4 + length);
    EXPECT_EQ(u32_be(png, at + 8 + length), static_cast<std::uint32_t>(crc)) << c.type << "'s CRC";
    chunks.push_back(std::move(c));
    at += 12 + length;
  }
  return chunks;
}

/// Random bytes 0..255 (every value likely present, never all zeros).
std::vector<std::uint8_t> random_bytes(std::int64_t n) {
  const std::vector<std::int64_t> v =
      minidl::randint(256, {n}, minidl::TensorOptions(minidl::kInt64)).to_vector<std::int64_t>();
  return std::vector<std::uint8_t>(v.begin(), v.end());
}

dcgan::ModelConfig small_model() {
  dcgan::ModelConfig c;
  c.latent = 16;
  c.g_width = 8;
  c.d_width = 8;
  return c;
}

dcgan::TrainConfig small_config(minidl::Device device = minidl::Device(minidl::kCPU)) {
  dcgan::TrainConfig c;
  c.device = device;
  c.model = small_model();
  c.batch_size = 16;
  c.seed = 11;
  c.progress = false;
  return c;
}

/// Every element equal (bitwise for floats: no NaN in these tensors).
void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(minidl::equal(a.cpu(), b.cpu())) << what << " differs";
}

double mean_of(const Tensor& t) { return t.to(minidl::kFloat64).mean().item<double>(); }
double std_of(const Tensor& t) { return t.to(minidl::kFloat64).std().item<double>(); }

}  // namespace

TEST(DcganExample, PngRoundTripsEveryPixelWithValidCrcs) {
  for (const auto& [w, h] : {std::pair<std::int64_t, std::int64_t>{37, 23}, {1, 1}, {274, 274}}) {
    const std::vector<std::uint8_t> pixels = random_bytes(w * h);
    const std::vector<std::uint8_t> png = dcgan::encode_png_gray(w, h, pixels);
    const std::vector<std::uint8_t> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    ASSERT_GT(png.size(), 8u);
    EXPECT_EQ(std::vector<std::uint8_t>(png.begin(), png.begin() + 8), signature);
    const std::vector<Chunk> chunks = read_chunks(png);
    ASSERT_GE(chunks.size(), 3u);
    EXPECT_EQ(chunks.front().type, "IHDR");
    EXPECT_EQ(chunks.back().type, "IEND");
    EXPECT_TRUE(chunks.back().data.empty());
    const std::vector<std::uint8_t>& ihdr = chunks.front().data;
    ASSERT_EQ(ihdr.size(), 13u);
    EXPECT_EQ(u32_be(ihdr, 0), w);
    EXPECT_EQ(u32_be(ihdr, 4), h);
    EXPECT_EQ(std::vector<std::uint8_t>(ihdr.begin() + 8, ihdr.end()), (std::vector<std::uint8_t>{8, 0, 0, 0, 0}))
        << "bit depth 8, grayscale, deflate, filter method 0, no interlace";
    std::vector<std::uint8_t> deflated;
    for (std::size_t i = 1; i + 1 < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].type, "IDAT");
      deflated.insert(deflated.end(), chunks[i].data.begin(), chunks[i].data.end());
    }
    std::vector<std::uint8_t> raw(static_cast<std::size_t>(h * (w + 1)) + 1);
    uLongf raw_size = raw.size();
    ASSERT_EQ(uncompress(raw.data(), &raw_size, deflated.data(), deflated.size()), Z_OK);
    ASSERT_EQ(raw_size, static_cast<uLongf>(h * (w + 1))) << "one filter byte and w pixels per row";
    for (std::int64_t y = 0; y < h; ++y) {
      ASSERT_EQ(raw[y * (w + 1)], 0) << "row " << y << "'s filter type";
      for (std::int64_t x = 0; x < w; ++x) {
        ASSERT_EQ(raw[y * (w + 1) + 1 + x], pixels[y * w + x])
            << "pixel (" << x << ", " << y << ") of " << w << "x" << h;
      }
    }
  }
  EXPECT_ERROR(minidl::ValueError, dcgan::encode_png_gray(4, 3, std::vector<std::uint8_t>(11)), "encode_png_gray",
               "needs 12", "found 11");
  EXPECT_ERROR(minidl::ValueError, dcgan::encode_png_gray(0, 3, {}), "encode_png_gray", "0 x 3");
  EXPECT_ERROR(minidl::IOError, dcgan::write_png_gray("/nonexistent-dir/x.png", 1, 1, {7}), "/nonexistent-dir/x.png");
}

TEST(DcganExample, SampleGridTilesImagesAsMakeGrid) {
  const Tensor images = minidl::uniform({5, 1, 4, 3}, -1.2, 1.2);  // some values outside [-1, 1]: clamped
  const dcgan::GrayImage g = dcgan::tile_images(images, 2, 1);
  ASSERT_EQ(g.width, 2 * (3 + 1) + 1);
  ASSERT_EQ(g.height, 3 * (4 + 1) + 1);
  const std::vector<float> v = images.to_vector<float>();
  std::vector<bool> covered(g.pixels.size(), false);
  for (std::int64_t i = 0; i < 5; ++i) {
    for (std::int64_t y = 0; y < 4; ++y) {
      for (std::int64_t x = 0; x < 3; ++x) {
        const std::int64_t at = (1 + (i / 2) * 5 + y) * g.width + 1 + (i % 2) * 4 + x;
        const double expected = std::lround(std::clamp((v[(i * 4 + y) * 3 + x] + 1.0) * 127.5, 0.0, 255.0));
        EXPECT_EQ(g.pixels[at], expected) << "image " << i << " (" << x << ", " << y << ")";
        covered[at] = true;
      }
    }
  }
  for (std::size_t k = 0; k < g.pixels.size(); ++k) {
    if (!covered[k]) EXPECT_EQ(g.pixels[k], 0) << "padding or the empty sixth cell at " << k;
  }
  EXPECT_ERROR(minidl::ValueError, dcgan::tile_images(minidl::zeros({2, 3, 4, 4})), "tile_images", "[2, 3, 4, 4]");
}

TEST(DcganExample, ParameterNamesShapesAndOutputs) {
  dcgan::ModelConfig c;  // DCGAN's sizes: latent 100, widths 64
  dcgan::DCGAN model(c);
  const std::vector<std::pair<std::string, minidl::Shape>> expected = {
      {"generator.main.0.weight", {100, 256, 4, 4}},
      {"generator.main.1.weight", {256}},
      {"generator.main.1.bias", {256}},
      {"generator.main.3.weight", {256, 128, 4, 4}},
      {"generator.main.4.weight", {128}},
      {"generator.main.4.bias", {128}},
      {"generator.main.6.weight", {128, 64, 4, 4}},
      {"generator.main.7.weight", {64}},
      {"generator.main.7.bias", {64}},
      {"generator.main.9.weight", {64, 1, 4, 4}},
      {"discriminator.main.0.weight", {64, 1, 4, 4}},
      {"discriminator.main.2.weight", {128, 64, 4, 4}},
      {"discriminator.main.3.weight", {128}},
      {"discriminator.main.3.bias", {128}},
      {"discriminator.main.5.weight", {256, 128, 4, 4}},
      {"discriminator.main.6.weight", {256}},
      {"discriminator.main.6.bias", {256}},
      {"discriminator.main.8.weight", {1, 256, 4, 4}}};
  const auto named = model->named_parameters();
  ASSERT_EQ(named.size(), expected.size());
  std::size_t i = 0;
  for (const auto& item : named) {
    EXPECT_EQ(item.key(), expected[i].first) << "parameter " << i;
    EXPECT_EQ(item.value().sizes(), expected[i].second) << item.key();
    ++i;
  }
  EXPECT_EQ(model->named_buffers().size(), 15u) << "five BatchNorm2d, three buffers each";

  const Tensor z = minidl::randn({3, 100, 1, 1});
  const Tensor images = model->generator(z);
  EXPECT_EQ(images.sizes(), (minidl::Shape{3, 1, 32, 32}));
  EXPECT_LE(images.abs().max().item<float>(), 1.0f) << "Tanh's range";
  minidl::testing::expect_close(model->generator(z.view({3, 100})), model->generator(z), 1e-6, 1e-6,
                                "(N, latent) and (N, latent, 1, 1)");
  EXPECT_EQ(model->discriminator(images).sizes(), (minidl::Shape{3}));
  EXPECT_ERROR(minidl::ValueError, model->generator(minidl::randn({3, 99})), "Generator", "(N, 100, 1, 1)", "[3, 99]");
  EXPECT_ERROR(minidl::ValueError, model->discriminator(minidl::randn({3, 1, 28, 28})), "Discriminator",
               "(N, 1, 32, 32)", "[3, 1, 28, 28]");
}

TEST(DcganExample, InitialisationIsDcgans) {
  minidl::manual_seed(5);
  dcgan::DCGAN model{dcgan::ModelConfig()};
  dcgan::dcgan_init(*model);
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const Tensor& p = item.value();
    const double n = static_cast<double>(p.numel());
    if (p.dim() == 4) {  // convolutions: N(0, 0.02); 5 standard errors of slack for the smallest (1024 values)
      EXPECT_NEAR(mean_of(p), 0.0, 5 * 0.02 / std::sqrt(n)) << name;
      EXPECT_NEAR(std_of(p), 0.02, 5 * 0.02 / std::sqrt(2 * n)) << name;
    } else if (name.compare(name.size() - 7, 7, ".weight") == 0) {  // BatchNorm scales: N(1, 0.02)
      EXPECT_NEAR(mean_of(p), 1.0, 5 * 0.02 / std::sqrt(n)) << name;
      EXPECT_NEAR(std_of(p), 0.02, 5 * 0.02 / std::sqrt(2 * n)) << name;
    } else {
      EXPECT_TRUE(minidl::equal(p, minidl::zeros_like(p))) << name << ": BatchNorm shifts start at zero";
    }
  }
  for (const auto& item : model->named_buffers()) {
    const std::string& name = item.key();
    const double fill = name.find("running_var") != std::string::npos ? 1.0 : 0.0;
    EXPECT_TRUE(minidl::equal(item.value(), minidl::full_like(item.value(), fill))) << name;
  }
}

TEST(DcganExample, TrainingStepsKeepLossesFiniteAndMoveEveryParameter) {
  auto data = std::make_shared<const dcgan::ImageSet>(dcgan::ImageSet::synthetic(64, 3));
  dcgan::Trainer trainer(small_config(), data);
  std::map<std::string, Tensor> before;
  for (const auto& item : trainer.model()->named_parameters()) before[item.key()] = item.value().clone();
  std::vector<dcgan::IntervalStats> intervals;
  const dcgan::EpochStats s = trainer.train_epoch([&](const dcgan::IntervalStats& is) { intervals.push_back(is); });
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(trainer.iter(), 4);
  for (const double v : {s.means.loss_d, s.means.loss_g}) EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  for (const double v : {s.means.d_x, s.means.d_g_z1, s.means.d_g_z2}) EXPECT_TRUE(v > 0 && v < 1) << v;
  ASSERT_EQ(intervals.size(), 1u) << "log_every 50: one interval for the epoch's 4 steps";
  EXPECT_EQ(intervals[0].steps, 4);
  EXPECT_DOUBLE_EQ(intervals[0].means.loss_g, s.means.loss_g);
  for (const auto& item : trainer.model()->named_parameters()) {
    const Tensor moved = minidl::ne(item.value(), before[item.key()]);
    EXPECT_TRUE(minidl::all(moved).item<bool>()) << item.key() << ": Adam moves every weight with a gradient";
  }
  // The statistics are the mean of the steps': one more step by hand, compared with a step's own values.
  dcgan::StepTensors st = trainer.step(data->get_batch({0, 1, 2, 3}).data, trainer.draw_noise(4));
  for (const Tensor& t : {st.loss_d, st.loss_g, st.d_x, st.d_g_z1, st.d_g_z2}) {
    EXPECT_EQ(t.dim(), 0);
    EXPECT_TRUE(std::isfinite(t.item<float>()));
  }
  const Tensor samples = trainer.fixed_samples();
  EXPECT_EQ(samples.sizes(), (minidl::Shape{dcgan::kFixedSamples, 1, 32, 32}));
}

TEST(DcganExample, FashionMnistIsPaddedToTheTanhRange) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " is not installed (apt-get install dataset-fashion-mnist)";
  const dcgan::ImageSet set = dcgan::fashion_mnist(dir, 10);
  ASSERT_EQ(set.images().sizes(), (minidl::Shape{10, 1, 32, 32}));
  minidl::data::Normalization none;
  const minidl::data::MnistDataset raw = minidl::data::MnistDataset::load(dir, true, none);  // pixels in [0, 1]
  const Tensor inner = set.images().narrow(2, 2, 28).narrow(3, 2, 28);
  minidl::testing::expect_close(inner, raw.images().narrow(0, 0, 10) * 2.0 - 1.0, 1e-6, 1e-6, "the 28x28 inside");
  const Tensor border = minidl::cat({set.images().narrow(2, 0, 2).flatten(), set.images().narrow(2, 30, 2).flatten(),
                                     set.images().narrow(3, 0, 2).flatten(), set.images().narrow(3, 30, 2).flatten()});
  EXPECT_TRUE(minidl::equal(border, minidl::full_like(border, -1.0))) << "the padding is the background, -1";
  EXPECT_ERROR(minidl::IOError, dcgan::fashion_mnist("/nonexistent-dir"), "/nonexistent-dir");
}

TEST(DcganExample, ResumeContinuesBitwiseOnTheCpu) {
  const fs::path dir = temp_dir("resume");
  const std::string ckpt = (dir / "ck.safetensors").string();
  auto data = std::make_shared<const dcgan::ImageSet>(dcgan::ImageSet::synthetic(40, 4));  // 3 steps, the last of 8

  dcgan::Trainer straight(small_config(), data);
  straight.train_epoch();
  (void)straight.fixed_samples();  // as dcgan draws its picture before it saves
  straight.train_epoch();
  {
    dcgan::Trainer first(small_config(), data);
    first.train_epoch();
    (void)first.fixed_samples();
    first.save(ckpt);
  }
  minidl::manual_seed(12345);  // the resumed run must not depend on the generators' state before resume()
  dcgan::Trainer resumed(small_config(), data);
  resumed.resume(ckpt);
  EXPECT_EQ(resumed.epoch(), 1);
  EXPECT_EQ(resumed.iter(), 3);
  resumed.train_epoch();
  EXPECT_EQ(resumed.iter(), 6);

  const auto a = straight.model()->named_parameters(), b = resumed.model()->named_parameters();
  for (const auto& item : a) expect_identical(item.value(), b[item.key()], item.key());
  const auto ba = straight.model()->named_buffers(), bb = resumed.model()->named_buffers();
  for (const auto& item : ba) expect_identical(item.value(), bb[item.key()], item.key());
  for (const auto& [sa, sb] : {std::pair{straight.optimizer_d().state_dict(), resumed.optimizer_d().state_dict()},
                               std::pair{straight.optimizer_g().state_dict(), resumed.optimizer_g().state_dict()}}) {
    ASSERT_EQ(sa.size(), sb.size());
    for (const auto& [k, v] : sa) expect_identical(v, sb.at(k), "optimizer " + k);
  }
  expect_identical(straight.fixed_samples(), resumed.fixed_samples(), "the samples of the fixed latent batch");

  const minidl::io::SafetensorsContents file = minidl::io::read_safetensors(ckpt);
  EXPECT_EQ(file.metadata.at("dcgan.latent"), "16");
  EXPECT_EQ(file.metadata.at("dcgan.epoch"), "1");
  dcgan::TrainConfig other = small_config();
  other.model.latent = 20;
  dcgan::Trainer wrong_model(other, data);
  EXPECT_ERROR(minidl::ValueError, wrong_model.resume(ckpt), "--resume", "latent 16", "latent 20");
  other = small_config();
  other.seed = 12;
  dcgan::Trainer wrong_seed(other, data);
  EXPECT_ERROR(minidl::ValueError, wrong_seed.resume(ckpt), "--resume", "--seed 11", "give 12");
  fs::remove_all(dir);
}

TEST(DcganExample, MetricsHeader) {
  EXPECT_STREQ(dcgan::MetricsWriter::header(), "epoch,iter,loss_d,loss_g,d_x,d_g_z1,d_g_z2,ms_per_step,elapsed_s");
}

namespace {

struct CliResult {
  int status;
  std::string output;
};

CliResult run_cli(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("minidl_dcgan_cli_" + std::to_string(::getpid()) + ".log");
  const int raw = std::system((std::string(DCGAN_BINARY) + " " + args + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::string out{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  fs::remove(log);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, out};
}

}  // namespace

TEST(DcganExample, CommandLineErrorsSamplesAndMetrics) {
  CliResult r = run_cli("--synthetic --data /tmp");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--synthetic"), std::string::npos) << r.output;
  r = run_cli("--data /nonexistent-dir");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent-dir"), std::string::npos) << r.output;
  r = run_cli("--resume /nonexistent/ck.safetensors");
  EXPECT_EQ(r.status, 2) << r.output;
  r = run_cli("--batch-size 1");
  EXPECT_EQ(r.status, 2) << r.output;

  const fs::path dir = temp_dir("cli");
  const std::string csv = (dir / "m.csv").string(), ck = (dir / "ck.safetensors").string();
  const std::string flags =
      " --synthetic --train-limit 8 --batch-size 4 --latent 8 --device cpu --threads 2"
      " --log-every 1 --no-progress --samples-dir " +
      (dir / "samples").string();
  r = run_cli(flags + " --epochs 1 --metrics " + csv + " --save " + ck);
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(csv);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << "the header and one row per step";
  EXPECT_EQ(lines[0], dcgan::MetricsWriter::header());
  EXPECT_EQ(lines[1].rfind("1,1,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("1,2,", 0), 0u) << lines[2];
  const fs::path png = dir / "samples" / "epoch_001.png";
  ASSERT_TRUE(fs::exists(png)) << r.output;
  std::ifstream png_in(png, std::ios::binary);
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(png_in), std::istreambuf_iterator<char>()};
  const std::vector<Chunk> chunks = read_chunks(bytes);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(u32_be(chunks[0].data, 0), 8 * 34 + 2) << "8 columns of 32 + 2 pixels, 2 more at the edge";
  EXPECT_TRUE(fs::exists(ck) && fs::exists(dcgan::state_path(ck)));
  // A second epoch from the checkpoint appends to the metrics and draws epoch 2.
  r = run_cli(flags + " --epochs 2 --metrics " + csv + " --resume " + ck);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "samples" / "epoch_002.png"));
  fs::remove_all(dir);
}

// CPU vs GPU: one step from the same weights, batch and latent vectors, in float32 with TF32 off.
TEST(DcganExample, GpuStepMatchesTheCpu) {
  MINIDL_REQUIRE_GPU();
  const bool conv = minidl::cuda::allow_tf32_conv(), matmul = minidl::cuda::allow_tf32_matmul();
  minidl::cuda::set_allow_tf32(false, false);
  auto data = std::make_shared<const dcgan::ImageSet>(dcgan::ImageSet::synthetic(16, 5));
  dcgan::Trainer cpu(small_config(), data);
  dcgan::Trainer gpu(small_config(minidl::Device(minidl::kCUDA, 0)), data);
  const Tensor real = data->get_batch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}).data;
  const Tensor noise = minidl::randn({16, 16, 1, 1});
  dcgan::StepTensors sc, sg;
  const Tensor fake_c = cpu.update_discriminator(real, noise, sc);
  const Tensor fake_g = gpu.update_discriminator(real.cuda(), noise.cuda(), sg);
  minidl::testing::expect_close(fake_g, fake_c, 1e-4, 1e-5, "G(z)");
  const auto grads = [](dcgan::Trainer& t, const std::string& prefix) {
    std::map<std::string, Tensor> g;
    for (const auto& item : t.model()->named_parameters()) {
      if (item.key().rfind(prefix, 0) == 0) g[item.key()] = item.value().grad().cpu();
    }
    return g;
  };
  const auto compare_grads = [&](const std::string& prefix) {
    const auto gc = grads(cpu, prefix), gg = grads(gpu, prefix);
    for (const auto& [name, g] : gc) {
      const double scale = g.abs().max().item<float>();
      minidl::testing::expect_close(gg.at(name), g, 0.0, 1e-4 * scale, "grad " + name);
    }
  };
  compare_grads("discriminator.");
  cpu.update_generator(fake_c, sc);
  gpu.update_generator(fake_g, sg);
  compare_grads("generator.");
  for (const auto& [c, g] :
       {std::pair{sc.loss_d, sg.loss_d}, std::pair{sc.loss_g, sg.loss_g}, std::pair{sc.d_x, sg.d_x},
        std::pair{sc.d_g_z1, sg.d_g_z1}, std::pair{sc.d_g_z2, sg.d_g_z2}}) {
    minidl::testing::expect_close(g, c, 1e-5, 1e-6, "step statistic");
  }
  for (const auto& item : cpu.model()->named_parameters()) {
    minidl::testing::expect_close(gpu.model()->named_parameters()[item.key()], item.value(), 0.0, 1e-6,
                                  "after the step: " + item.key());
  }
  minidl::cuda::set_allow_tf32(conv, matmul);
}
