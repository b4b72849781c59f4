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

TEST(PtxasReport, ParsesNvJitLinksLogWithPtxasLines) {
  // nvJitLink with -verbose -Xptxas=-v: ptxas's lines, then the link's summary per kernel
  // (quoted names, no spill counts), which must not hide ptxas's.
  std::string report =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'bwd' for 'sm_90a'\n"
      "ptxas info    : Function properties for bwd\n"
      "ptxas         .     128 bytes stack frame, 136 bytes spill stores, 164 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers, 800 bytes smem\n"
      "ptxas info    : Compile time = 124.160 ms\n"
      "info    : 0 bytes gmem\n"
      "info    : Function properties for 'bwd':\n"
      "info    : used 128 registers, used 1 barriers, 128 stack, 1824 bytes smem, 644 bytes "
      "cmem[0], "
      "0 bytes lmem\n";
  auto kernels = parsePtxasReport(report);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_TRUE(kernels["bwd"].reported);
  EXPECT_EQ(kernels["bwd"].spillStores, 136);
  EXPECT_EQ(kernels["bwd"].spillLoads, 164);
  EXPECT_EQ(kernels["bwd"].registers, 128);
  EXPECT_EQ(kernels["bwd"].staticSmem, 800);
  EXPECT_EQ(totalSpillStores(report), 136);
}

TEST(PtxasReport, NvJitLinksSummaryAloneLeavesSpillsUnknownWhereThereIsAStack) {
  // nvJitLink served both kernels from its cache: no ptxas lines. One without a stack frame
  // cannot spill (reported); one with a stack frame may have (unknown).
  std::string report = "info    : 0 bytes gmem\n"
                       "info    : Function properties for 'bwd':\n"
                       "info    : used 128 registers, used 1 barriers, 128 stack, 1824 bytes smem, "
                       "644 bytes cmem[0], 0 bytes lmem\n"
                       "info    : Function properties for 'sums':\n"
                       "info    : used 94 registers, used 1 barriers, 0 stack, 9216 bytes smem, "
                       "580 bytes cmem[0], 0 bytes lmem\n";
  auto kernels = parsePtxasReport(report);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_FALSE(kernels["bwd"].reported);
  EXPECT_EQ(kernels["bwd"].stackFrame, 128);
  EXPECT_TRUE(kernels["sums"].reported);
  EXPECT_EQ(kernels["sums"].spillStores, 0);
  EXPECT_TRUE(spillsUnknown(report));
  EXPECT_FALSE(
      spillsUnknown(report.substr(0, report.find("info    : Function properties for 'bwd'")) +
                    report.substr(report.find("info    : Function properties for 'sums'"))));
  EXPECT_FALSE(
      spillsUnknown("ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                    "ptxas         .     8 bytes stack frame, 8 bytes spill stores, 8 bytes "
                    "spill loads\n"));
}

TEST(PtxasReport, ASummaryWithoutAStackOrBeforePtxasLines) {
  // A summary header whose line gives no stack leaves the spills unknown; ptxas lines for the
  // same kernel, before or after its summary, make them known.
  std::string bare = "info    : Function properties for 'k':\n"
                     "info    : used 40 registers\n";
  EXPECT_FALSE(parsePtxasReport(bare)["k"].reported);
  EXPECT_TRUE(spillsUnknown(bare));
  std::string ptxas = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                      "ptxas info    : Function properties for k\n"
                      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes "
                      "spill loads\n";
  for (const std::string &report : {bare + ptxas, ptxas + bare}) {
    auto kernels = parsePtxasReport(report);
    EXPECT_TRUE(kernels["k"].reported);
    EXPECT_EQ(kernels["k"].spillStores, 4);
    EXPECT_FALSE(spillsUnknown(report));
  }
}
