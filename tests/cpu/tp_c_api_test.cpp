// The tensor-parallel plans' C ABI without a GPU: the entry points reject a
// missing plan or output with a message before touching anything.
#include <gtest/gtest.h>

#include <string>

#include "mkernel/mkernel.h"

TEST(TpCApi, CapturedRejectsMissingArguments) {
  int v = -1;
  EXPECT_NE(mk_ag_gemm_captured(nullptr, &v), 0);
  EXPECT_NE(std::string(mk_last_error()).find("plan"), std::string::npos);
  EXPECT_NE(mk_gemm_rs_captured(nullptr, &v), 0);
  EXPECT_NE(mk_gemm_ar_captured(nullptr, &v), 0);
  EXPECT_EQ(v, -1);  // untouched
  EXPECT_NE(mk_ag_gemm_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr), 0);
  EXPECT_NE(mk_gemm_rs_run(nullptr, nullptr, nullptr, nullptr, nullptr), 0);
  EXPECT_NE(mk_gemm_ar_run(nullptr, nullptr, nullptr, nullptr, nullptr), 0);
}
