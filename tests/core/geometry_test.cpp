#include <catch2/catch.hpp>

#include "core/geometry.h"

using namespace dwdeconv::core;

TEST_CASE("output length follows the ConvTranspose formula", "[core][geometry]") {
  const AxisGeometry g{4, 2, 1, 1, 0};
  CHECK(deconv_output_length(g, 16) == 32);
  CHECK(is_clean_upscale(g));
  const AxisGeometry wide{4, 2, 0, 1, 0};
  CHECK(deconv_output_length(wide, 16) == 33);
  CHECK(upscale_excess(wide) == std::optional<int64_t>(1));
  CHECK(describe_output_length(wide, "H") == "2*H+1");
  CHECK(describe_output_length(AxisGeometry{3, 2, 1, 1, 0}, "W") == "2*W-1");
}

TEST_CASE("explicit pads are used as given, begin and end may differ", "[core][geometry]") {
  AxisPadSpec spec;
  spec.explicit_begin = 2;
  spec.explicit_end = 1;
  auto g = resolve_axis(5, 2, 0, spec);
  REQUIRE(g.ok());
  CHECK(g->pad_begin == 2);
  CHECK(g->pad_end == 1);
}

TEST_CASE("SAME_UPPER and SAME_LOWER split odd totals as the schema says", "[core][geometry]") {
  // k=4, s=2, op=1: total = op + k - s = 3.
  AxisPadSpec spec;
  spec.auto_pad = AutoPad::kSameUpper;
  auto upper = resolve_axis(4, 2, 1, spec);
  REQUIRE(upper.ok());
  CHECK(upper->pad_begin == 1);  // total/2 at the begin
  CHECK(upper->pad_end == 2);
  spec.auto_pad = AutoPad::kSameLower;
  auto lower = resolve_axis(4, 2, 1, spec);
  REQUIRE(lower.ok());
  CHECK(lower->pad_begin == 2);  // the rest at the begin
  CHECK(lower->pad_end == 1);
  CHECK(is_clean_upscale(*upper));
  CHECK(is_clean_upscale(*lower));
}

TEST_CASE("output_shape overrides pads and needs the input size", "[core][geometry]") {
  AxisPadSpec spec;
  spec.explicit_begin = 7;  // ignored
  spec.output_size = 32;
  auto unknown = resolve_axis(4, 2, 0, spec);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().kind == ErrorKind::kDeclined);
  CHECK_THAT(unknown.error().message, Catch::Contains("unknown"));

  spec.input_size = 16;  // total = 2*15 + 0 + 4 - 32 = 2
  auto g = resolve_axis(4, 2, 0, spec);
  REQUIRE(g.ok());
  CHECK(g->pad_begin == 1);
  CHECK(g->pad_end == 1);

  spec.output_size = 33;  // total 1, NOTSET puts the odd one at the begin
  auto odd = resolve_axis(4, 2, 0, spec);
  REQUIRE(odd.ok());
  CHECK(odd->pad_begin == 1);
  CHECK(odd->pad_end == 0);
  CHECK_FALSE(is_clean_upscale(*odd));
}

TEST_CASE("VALID means zero pads, negative totals are declined", "[core][geometry]") {
  AxisPadSpec spec;
  spec.auto_pad = AutoPad::kValid;
  spec.explicit_begin = 3;
  auto valid = resolve_axis(2, 2, 0, spec);
  REQUIRE(valid.ok());
  CHECK(valid->pad_begin == 0);
  CHECK(valid->pad_end == 0);

  spec.auto_pad = AutoPad::kSameUpper;
  auto negative = resolve_axis(1, 3, 0, spec);  // total = 0 + 1 - 3
  REQUIRE_FALSE(negative.ok());
  CHECK_THAT(negative.error().message, Catch::Contains("-2"));
  CHECK_FALSE(parse_auto_pad("SAME").has_value());
  CHECK(parse_auto_pad("") == AutoPad::kNotSet);
}

TEST_CASE("hostile strides and pads overflow to no length, never to a wrapped one", "[core][geometry]") {
  // Strides and pads are int64 attributes. The lengths used to wrap, and keep reasons printed
  // "(-9223372036854775807x-9223372036854775807 from 3x3)".
  const int64_t huge = int64_t{1} << 62;
  const AxisGeometry wide_stride{1, huge, 0, 0, 0};
  CHECK(deconv_output_length(wide_stride, 3) == std::nullopt);
  CHECK(deconv_output_length(wide_stride, 1) == std::optional<int64_t>(1));
  const AxisGeometry huge_pads{1, 2, huge, huge, 0};
  CHECK(upscale_excess(huge_pads) == std::nullopt);
  CHECK_FALSE(is_clean_upscale(huge_pads));
  CHECK(describe_output_length(huge_pads, "H") == "2*H off by more than int64 holds");
  CHECK(deconv_output_length(huge_pads, 3) == std::optional<int64_t>(5 - huge - huge));  // negative, but it fits
}
