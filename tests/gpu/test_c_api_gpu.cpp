// The C ABI on one GPU: a communicator from the environment, a symmetric
// buffer written and read back through its pointers, clean teardown.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "mkernel/mkernel.h"

TEST(CApiGpu, CommunicatorAndSymmetricBuffer) {
  mk_comm_t comm = nullptr;
  ASSERT_EQ(mk_comm_init_env(&comm, -1), 0) << mk_last_error();
  mk_comm_info_t ci;
  ASSERT_EQ(mk_comm_info(comm, &ci), 0) << mk_last_error();
  EXPECT_EQ(ci.world, 1);
  EXPECT_EQ(ci.local_size, 1);
  EXPECT_GE(ci.device, 0);
  mk_symm_t buf = nullptr;
  ASSERT_EQ(mk_symm_alloc(comm, (1 << 20) + 3, &buf), 0) << mk_last_error();
  mk_symm_info_t si;
  ASSERT_EQ(mk_symm_info(buf, &si), 0);
  ASSERT_NE(si.local, nullptr);
  EXPECT_EQ(si.peers[0], si.local);
  EXPECT_EQ(si.bytes, size_t(1 << 20) + 3);
  std::vector<unsigned char> h(si.bytes), back(si.bytes, 0);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<unsigned char>(i * 131 + 7);
  ASSERT_EQ(cudaMemcpy(si.local, h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), si.local, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, back);
  EXPECT_EQ(mk_comm_check(comm), 0) << mk_last_error();
  EXPECT_EQ(mk_symm_free(comm, buf), 0) << mk_last_error();
  EXPECT_EQ(mk_comm_destroy(comm), 0);
}
