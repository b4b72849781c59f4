// Unit tests of the ptxas report parser.
#include "PtxUtils.h"

#include <gtest/gtest.h>

using namespace cute_torch;

TEST(PtxasReport, ParsesResourcesPerKernel) {
  std::string report =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'vadd' for 'sm_90a'\n"
      "ptxas info    : Function properties for vadd\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 0 barriers, 1024 bytes smem, 380 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_90a'\n"
      "ptxas info    : Used 32 registers, 360 bytes cmem[0]\n";
  auto kernels = parsePtxasReport(report);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels["vadd"].registers, 10);
  EXPECT_EQ(kernels["vadd"].stackFrame, 8);
  EXPECT_EQ(kernels["vadd"].spillStores, 4);
  EXPECT_EQ(kernels["vadd"].spillLoads, 12);
  EXPECT_EQ(kernels["vadd"].staticSmem, 1024);
  EXPECT_EQ(kernels["other"].registers, 32);
  EXPECT_EQ(kernels["other"].staticSmem, 0);
  EXPECT_EQ(totalSpillStores(report), 4);
  EXPECT_EQ(totalSpillStores("ptxas info    : Used 32 registers\n"), 0);
}
