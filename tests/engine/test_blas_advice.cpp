// The BLAS check behind the plugin's OPENBLAS_CORETYPE warning (src/blas_advice.h).
#include <gtest/gtest.h>

#include <cstdio>

#include "blas_advice.h"

namespace {

TEST(BlasAdvice, GenericCoreOnAnAvx512CpuAsksForSkylakeX) {
  const auto advice = otf::openblas_core_advice("Prescott", {true, true});
  ASSERT_TRUE(advice.has_value());
  EXPECT_NE(advice->find("'Prescott'"), std::string::npos) << *advice;
  EXPECT_NE(advice->find("OPENBLAS_CORETYPE=SKYLAKEX"), std::string::npos) << *advice;
  EXPECT_NE(advice->find("AVX-512"), std::string::npos) << *advice;
}

TEST(BlasAdvice, GenericCoreOnAnAvx2CpuAsksForHaswell) {
  const auto advice = otf::openblas_core_advice("NEHALEM", {true, false});
  ASSERT_TRUE(advice.has_value());
  EXPECT_NE(advice->find("OPENBLAS_CORETYPE=HASWELL"), std::string::npos) << *advice;
  EXPECT_TRUE(otf::openblas_core_advice("Sandybridge", {true, true}).has_value());
  EXPECT_TRUE(otf::openblas_core_advice("core2", {true, true}).has_value());
}

TEST(BlasAdvice, CoresThatFitTheCpuAndOldCpusGetNoAdvice) {
  EXPECT_FALSE(otf::openblas_core_advice("SkylakeX", {true, true}).has_value());
  EXPECT_FALSE(otf::openblas_core_advice("Haswell", {true, false}).has_value());
  EXPECT_FALSE(otf::openblas_core_advice("Zen", {true, false}).has_value());
  EXPECT_FALSE(otf::openblas_core_advice("CooperLake", {true, true}).has_value());
  // A CPU without AVX2 has nothing better than the generic kernels.
  EXPECT_FALSE(otf::openblas_core_advice("Prescott", {false, false}).has_value());
}

TEST(BlasAdvice, ThisProcessIsConsistent) {
  // LibTorch from PyPI carries MKL (no OpenBLAS), Debian's links OpenBLAS: either way, advice
  // exists only when an OpenBLAS core is reported and is the advice for that core.
  const auto core = otf::openblas_core_name();
  const auto advice = otf::blas_advice();
  std::printf("OpenBLAS core in this process: %s\n", core ? core->c_str() : "none (no OpenBLAS)");
  if (!core) {
    EXPECT_FALSE(advice.has_value());
  } else {
    EXPECT_FALSE(core->empty());
    EXPECT_EQ(advice, otf::openblas_core_advice(*core, otf::cpu_vector_features()));
  }
}

}  // namespace
