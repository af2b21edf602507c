// otf::Precision: the one parser every caller uses accepts exactly the spellings of docs/design.md
// §7.1 (canonical names, fp32/bf16/fp16, optional "torch.", any case, surrounding whitespace) and
// rejects everything else with a message that names the value and lists what is accepted.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cctype>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "precision_dtype.h"

namespace {

using otf::Precision;

constexpr Precision kAllPrecisions[] = {Precision::Float32, Precision::BFloat16,
                                        Precision::Float16};

struct Spelling {
  std::string text;
  Precision precision;
};

const std::vector<Spelling>& base_spellings() {
  static const std::vector<Spelling> spellings{
      {"float32", Precision::Float32}, {"bfloat16", Precision::BFloat16},
      {"float16", Precision::Float16}, {"fp32", Precision::Float32},
      {"bf16", Precision::BFloat16},   {"fp16", Precision::Float16},
  };
  return spellings;
}

// Every upper/lower-case combination of the letters of `text` (2^letters strings).
std::vector<std::string> case_variants(const std::string& text) {
  std::vector<std::string> variants{""};
  for (const char c : text) {
    std::vector<std::string> next;
    const auto lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto upper = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const auto& prefix : variants) {
      next.push_back(prefix + lower);
      if (upper != lower) next.push_back(prefix + upper);
    }
    variants = std::move(next);
  }
  return variants;
}

std::string rejection_message(const std::string& text) {
  try {
    otf::parse_precision(text);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << "parse_precision('" << text << "') did not throw std::invalid_argument";
  return {};
}

TEST(Precision, CanonicalNamesAndAliases) {
  for (const auto& [text, precision] : base_spellings()) {
    EXPECT_EQ(otf::parse_precision(text), precision) << text;
  }
}

TEST(Precision, EveryCaseVariantWithAndWithoutTorchPrefix) {
  size_t checked = 0;
  for (const auto& [text, precision] : base_spellings()) {
    for (const auto& spelled : case_variants(text)) {
      EXPECT_EQ(otf::parse_precision(spelled), precision) << spelled;
      ++checked;
    }
    for (const auto& spelled : case_variants("torch." + text)) {
      EXPECT_EQ(otf::parse_precision(spelled), precision) << spelled;
      ++checked;
    }
  }
  // Guards against the generator silently shrinking: "bf16" has 2 letters, "torch.bfloat16" 11.
  EXPECT_EQ(case_variants("bf16").size(), 4u);
  EXPECT_EQ(case_variants("torch.bfloat16").size(), 2048u);
  EXPECT_EQ(checked, 4620u);
  EXPECT_EQ(otf::parse_precision("TORCH.Float16"), Precision::Float16);
  EXPECT_EQ(otf::parse_precision("BF16"), Precision::BFloat16);
}

TEST(Precision, SurroundingWhitespaceIsTrimmed) {
  EXPECT_EQ(otf::parse_precision("  fp16"), Precision::Float16);
  EXPECT_EQ(otf::parse_precision("bf16 \t"), Precision::BFloat16);
  EXPECT_EQ(otf::parse_precision("\n torch.float32\r\n"), Precision::Float32);
  EXPECT_EQ(otf::parse_precision("\v\fTorch.BFloat16 "), Precision::BFloat16);
}

TEST(Precision, RejectsEverythingElseNamingTheValueAndTheAcceptedSpellings) {
  // clang-format off
  const std::vector<std::string> rejected{
      "float64", "fp64", "double", "torch.float64", "torch.double", "fp8", "float8", "int8",
      "int32", "half", "half?", "torch.half", "bfloat", "float", "torch.float", "tf32", "f16",
      "b16", "", "   ", "torch.", "TORCH.", "float 16", "fp 16", "bf-16", "float_16",
      "torch. float16", "torch.torch.float16", "torch_float16", "torch float16", "float16x",
      "xfloat16", "fp16 bf16", "fp16,", "'fp16'", "\"bf16\"", "fp16?", "float32.", ".fp32"};
  // clang-format on
  for (const auto& text : rejected) {
    const std::string message = rejection_message(text);
    EXPECT_NE(message.find("unknown precision '" + text + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("accepted: float32, bfloat16, float16; aliases fp32, bf16, fp16; an "
                           "optional 'torch.' prefix; any case"),
              std::string::npos)
        << message;
  }
}

TEST(Precision, RejectionMessageIsExactlyTheDocumentedOne) {
  EXPECT_EQ(rejection_message("fp64"),
            "unknown precision 'fp64' (accepted: float32, bfloat16, float16; aliases fp32, bf16, "
            "fp16; an optional 'torch.' prefix; any case)");
}

TEST(Precision, FromScalarType) {
  EXPECT_EQ(otf::precision_from_dtype(c10::ScalarType::Float), Precision::Float32);
  EXPECT_EQ(otf::precision_from_dtype(c10::ScalarType::BFloat16), Precision::BFloat16);
  EXPECT_EQ(otf::precision_from_dtype(c10::ScalarType::Half), Precision::Float16);
  for (const auto dtype :
       {c10::ScalarType::Double, c10::ScalarType::Int, c10::ScalarType::Long, c10::ScalarType::Bool,
        c10::ScalarType::ComplexFloat, c10::ScalarType::Byte}) {
    try {
      otf::precision_from_dtype(dtype);
      ADD_FAILURE() << "accepted " << c10::toString(dtype);
    } catch (const std::invalid_argument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(std::string("'") + c10::toString(dtype) + "'"), std::string::npos)
          << message;
      EXPECT_NE(message.find("torch.float32, torch.bfloat16, torch.float16"), std::string::npos)
          << message;
    }
  }
}

TEST(Precision, FromTypeMetaAndTensorDtype) {
  EXPECT_EQ(otf::precision_from_dtype(caffe2::TypeMeta::Make<float>()), Precision::Float32);
  EXPECT_EQ(otf::precision_from_dtype(caffe2::TypeMeta::Make<c10::BFloat16>()),
            Precision::BFloat16);
  EXPECT_EQ(otf::precision_from_dtype(caffe2::TypeMeta::Make<c10::Half>()), Precision::Float16);
  EXPECT_EQ(otf::precision_from_dtype(torch::ones({2}, torch::kBFloat16).dtype()),
            Precision::BFloat16);
  EXPECT_THROW(otf::precision_from_dtype(caffe2::TypeMeta::Make<double>()), std::invalid_argument);
  EXPECT_THROW(otf::precision_from_dtype(torch::ones({2}, torch::kFloat64).dtype()),
               std::invalid_argument);
  // A TypeMeta that is no scalar type at all is rejected the same way, not with a c10::Error.
  EXPECT_THROW(otf::precision_from_dtype(caffe2::TypeMeta::Make<std::string>()),
               std::invalid_argument);
}

TEST(Precision, ToStringIsCanonicalAndRoundTrips) {
  EXPECT_EQ(otf::to_string(Precision::Float32), "float32");
  EXPECT_EQ(otf::to_string(Precision::BFloat16), "bfloat16");
  EXPECT_EQ(otf::to_string(Precision::Float16), "float16");
  for (const Precision precision : kAllPrecisions) {
    EXPECT_EQ(otf::parse_precision(otf::to_string(precision)), precision);
    std::ostringstream streamed;
    streamed << precision;
    EXPECT_EQ(streamed.str(), otf::to_string(precision));
  }
}

TEST(Precision, ScalarTypeRoundTrips) {
  EXPECT_EQ(otf::to_scalar_type(Precision::Float32), c10::ScalarType::Float);
  EXPECT_EQ(otf::to_scalar_type(Precision::BFloat16), c10::ScalarType::BFloat16);
  EXPECT_EQ(otf::to_scalar_type(Precision::Float16), c10::ScalarType::Half);
  for (const Precision precision : kAllPrecisions) {
    EXPECT_EQ(otf::precision_from_dtype(otf::to_scalar_type(precision)), precision);
  }
}

TEST(Precision, OnlyFloat16NeedsAGradScaler) {
  EXPECT_FALSE(otf::needs_grad_scaler(Precision::Float32));
  EXPECT_FALSE(otf::needs_grad_scaler(Precision::BFloat16));
  EXPECT_TRUE(otf::needs_grad_scaler(Precision::Float16));
}

}  // namespace
