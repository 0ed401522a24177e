#include "augment.h"

#include "model.h"

namespace resnet {

namespace F = minidl::nn::functional;
using minidl::Tensor;

CropFlipDraws draw_crop_flip(std::int64_t n, const minidl::Device& device) {
  CropFlipDraws d;
  d.dy = minidl::randint(0, 2 * kCropPadding + 1, {n}).to(device);
  d.dx = minidl::randint(0, 2 * kCropPadding + 1, {n}).to(device);
  d.flip = minidl::randint(0, 2, {n}).to(device);
  return d;
}

Tensor crop_flip(const Tensor& gray, const CropFlipDraws& draws, double background) {
  minidl::NoGradGuard no_grad;
  constexpr std::int64_t S = kImageSize, P = kCropPadding;
  const std::int64_t n = gray.size(0);
  MINIDL_CHECK(gray.dim() == 4 && gray.size(1) == 1 && gray.size(2) == S && gray.size(3) == S, minidl::ValueError,
               "crop_flip: expected images (N, 1, 32, 32), found ", minidl::shape_str(gray.sizes()));
  const Tensor padded = F::pad(gray, F::PadFuncOptions({P, P, P, P}).value(background));  // (N, 1, 40, 40)
  const Tensor along = minidl::arange(S, minidl::TensorOptions(minidl::kInt64).device(gray.device())).view({1, S});
  // Rows dy + i of each image: (N, 1, 32, 40).
  const Tensor rows = (draws.dy.view({n, 1}) + along).view({n, 1, S, 1}).expand({n, 1, S, S + 2 * P});
  const Tensor cropped_rows = minidl::gather(padded, 2, rows);
  // Columns dx + j, or dx + 31 - j where flipped: j + flip * (31 - 2j).
  const Tensor cols = draws.dx.view({n, 1}) + along + draws.flip.view({n, 1}) * ((S - 1) - 2 * along);
  return minidl::gather(cropped_rows.expand({n, kInputChannels, S, S + 2 * P}), 3,
                        cols.view({n, 1, 1, S}).expand({n, kInputChannels, S, S}));
}

Tensor to_three_channels(const Tensor& gray) {
  return gray.expand({gray.size(0), kInputChannels, gray.size(2), gray.size(3)}).contiguous();
}

}  // namespace resnet
