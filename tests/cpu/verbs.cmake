# verbs transport (src/net/verbs: RC for InfiniBand and RoCE, SRD for EFA)
# between processes on this host, with no RDMA NIC: the tests put softverbs,
# a user-space stand-in for libibverbs.so.1 and libefa.so.1
# (tests/cpu/softverbs/softverbs.cpp: what it emulates and checks), first on
# LD_LIBRARY_PATH, and the transport dlopens it as it would rdma-core.
# Included by tests/CMakeLists.txt.
include(CheckIncludeFileCXX)
check_include_file_cxx(infiniband/efadv.h MK_SOFTVERBS_EFADV)  # as the library: without it no SRD path
add_library(mk_softverbs SHARED ${CMAKE_CURRENT_SOURCE_DIR}/cpu/softverbs/softverbs.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cpu/softverbs/softverbs_api.cpp ${CMAKE_CURRENT_SOURCE_DIR}/cpu/softverbs/softverbs_srd.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cpu/softverbs/softverbs_gpu.cpp)
target_include_directories(mk_softverbs PRIVATE ${CUDAToolkit_INCLUDE_DIRS})  # cuda.h; the driver is dlopened
set_target_properties(mk_softverbs PROPERTIES OUTPUT_NAME ibverbs SOVERSION 1
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/softverbs)
target_link_libraries(mk_softverbs PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
# Only the verbs C API leaves the library (softverbs.map).
target_link_options(mk_softverbs PRIVATE -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/cpu/softverbs/softverbs.map)
set_property(TARGET mk_softverbs APPEND PROPERTY LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cpu/softverbs/softverbs.map)
if(NOT CMAKE_CXX_FLAGS MATCHES "sanitize")  # (sanitizer runtimes stay undefined in shared libraries)
  target_link_options(mk_softverbs PRIVATE -Wl,--no-undefined)  # a missing symbol fails the link, not the dlopen
endif()
# libefa.so.1 is the same library (it exports efadv_*; SOFTVERBS_EFA=1 makes its device answer as EFA).
add_custom_command(TARGET mk_softverbs POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E create_symlink libibverbs.so.1 ${CMAKE_BINARY_DIR}/softverbs/libefa.so.1)
set(MK_SOFTVERBS_ENV "LD_LIBRARY_PATH=path_list_prepend:${CMAKE_BINARY_DIR}/softverbs")

# All-to-all rounds, 8 B .. 4 MiB with Set (inline write) and Add (atomic)
# signals, each message checked when its signal is seen; then a rank killed
# mid-stream: the writers must get an error naming it, bounded.
foreach(_n 2 3 4)
  add_test(NAME cpu.verbs_rounds_${_n}
    COMMAND ${MK_MKRUN} -n ${_n} --timeout 150 $<TARGET_FILE:mk_fabric_probe> --transport verbs)
endforeach()
# Small send queues (chains refused for room, a signalled WR every 3rd, 3 QPs
# a peer), and a NIC whose largest message is 64 KiB (4 MiB writes split into
# 64-WR chains).
add_test(NAME cpu.verbs_rounds_small_queues_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 150 env MK_IB_MAX_INFLIGHT=4 MK_IB_SIGNAL_EVERY=3 MK_IB_QPS_PER_PEER=3
          $<TARGET_FILE:mk_fabric_probe> --transport verbs)
add_test(NAME cpu.verbs_rounds_split_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 150 env SOFTVERBS_MAX_MSG_SZ=65536 $<TARGET_FILE:mk_fabric_probe> --transport verbs)
add_test(NAME cpu.verbs_dead_peer_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env MK_NET_TIMEOUT_MS=2000 $<TARGET_FILE:mk_fabric_probe> --transport verbs --kill-rank 1)
# One rank's NIC refuses a resource (softverbs' fault injection): every rank
# must fail that step with the same error naming the rank, none left waiting.
# RC: reg_mr #3 is region 1's (#1 the atomic scratch word, #2 region 0).
add_test(NAME cpu.verbs_register_fails_on_one_rank_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env SOFTVERBS_FAIL=reg_mr:3 SOFTVERBS_FAIL_RANK=1
          $<TARGET_FILE:mk_fabric_probe> --transport verbs --expect-error "register_region failed on rank 1")
add_test(NAME cpu.verbs_connect_fails_on_one_rank_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env SOFTVERBS_FAIL=create_qp:2 SOFTVERBS_FAIL_RANK=2
          $<TARGET_FILE:mk_fabric_probe> --transport verbs --expect-error "connect failed on rank 2")
# A bad peer list on one rank (its own rank among its peers): its error travels in the connect exchange, so every
# rank fails at once naming it (before, that rank threw alone and the others waited out the bootstrap bound, 60 s;
# MK_BOOTSTRAP_TIMEOUT_MS=30000 keeps that case past mkrun's 20 s bound).
add_test(NAME cpu.verbs_connect_bad_peer_on_one_rank_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 20 env MK_BOOTSTRAP_TIMEOUT_MS=30000 $<TARGET_FILE:mk_fabric_probe>
          --transport verbs --bad-peer-rank 1 --expect-error "connect failed on rank 1: verbs: connect: peer rank 1")
# Queue pairs whose completions cannot all fit the device's largest completion queue (a device offering 1000
# entries; 8 QPs x 128 in flight + 16 need 1040): refused at connect with the numbers, on every rank (before, the
# queue was capped silently and could overflow under a burst).
add_test(NAME cpu.verbs_cq_too_small_2
  COMMAND ${MK_MKRUN} -n 2 --timeout 60 env SOFTVERBS_MAX_CQE=1000 MK_IB_QPS_PER_PEER=8
          $<TARGET_FILE:mk_fabric_probe> --transport verbs --expect-error "offers completion queues of at most 1000")
# A NIC without remote atomics (RC's Add signals are fetch-adds): refused when the transport opens, naming them.
add_test(NAME cpu.verbs_no_atomics_2
  COMMAND ${MK_MKRUN} -n 2 --timeout 60 env SOFTVERBS_LACKS=atomics
          $<TARGET_FILE:mk_fabric_probe> --transport verbs --expect-error "offers no usable remote atomics")
set_tests_properties(cpu.verbs_register_fails_on_one_rank_3 cpu.verbs_connect_fails_on_one_rank_3
  cpu.verbs_connect_bad_peer_on_one_rank_3
  cpu.verbs_cq_too_small_2 cpu.verbs_no_atomics_2
  PROPERTIES LABELS cpu TIMEOUT 90 ENVIRONMENT_MODIFICATION "${MK_SOFTVERBS_ENV}")
# The command ring and host proxy over verbs (MK_NET=verbs through make_transport).
foreach(_n 2 3 4)
  add_test(NAME cpu.net_proxy_verbs_${_n}
    COMMAND ${MK_MKRUN} -n ${_n} --timeout 120 env MK_NET=verbs MK_NET_TIMEOUT_MS=10000 $<TARGET_FILE:mk_net_probe>)
endforeach()
# The EFA SRD path (efa_srd.cpp: write-with-immediate, inline SEND records,
# signals applied by the receiver, every completion out of order), with
# SOFTVERBS_EFA=1: the same rounds, split writes (record-form signals of 64
# parts), a killed peer, and ring + proxy + verbs.
if(MK_SOFTVERBS_EFADV)
foreach(_n 2 3 4)
  add_test(NAME cpu.verbs_efa_rounds_${_n}
    COMMAND ${MK_MKRUN} -n ${_n} --timeout 150 env SOFTVERBS_EFA=1 $<TARGET_FILE:mk_fabric_probe> --transport verbs)
endforeach()
add_test(NAME cpu.verbs_efa_rounds_split_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 150 env SOFTVERBS_EFA=1 SOFTVERBS_MAX_MSG_SZ=65536
          $<TARGET_FILE:mk_fabric_probe> --transport verbs)
add_test(NAME cpu.verbs_efa_dead_peer_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env SOFTVERBS_EFA=1 MK_NET_TIMEOUT_MS=2000 $<TARGET_FILE:mk_fabric_probe>
          --transport verbs --kill-rank 1)
add_test(NAME cpu.verbs_efa_connect_fails_on_one_rank_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env SOFTVERBS_EFA=1 SOFTVERBS_FAIL=create_qp:3 SOFTVERBS_FAIL_RANK=0
          $<TARGET_FILE:mk_fabric_probe> --transport verbs --expect-error "connect failed on rank 0")
# A receive that cannot be posted while the QPs are made (its error names the peer; session 56's first form of that
# message read the batcher, made after the QPs, and crashed): every rank fails at once naming the rank.
add_test(NAME cpu.verbs_efa_post_recv_fails_on_one_rank_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env SOFTVERBS_EFA=1 SOFTVERBS_FAIL=post_recv:5 SOFTVERBS_FAIL_RANK=1
          $<TARGET_FILE:mk_fabric_probe> --transport verbs
          --expect-error "connect failed on rank 1: verbs: ibv_post_recv")
# An EFA device without RNR retry (a sender outrunning the receiver's reposting would lose a signal): refused.
add_test(NAME cpu.verbs_efa_no_rnr_retry_2
  COMMAND ${MK_MKRUN} -n 2 --timeout 60 env SOFTVERBS_EFA=1 SOFTVERBS_LACKS=rnr_retry
          $<TARGET_FILE:mk_fabric_probe> --transport verbs --expect-error "has no RNR retry")
foreach(_n 3 4)
  add_test(NAME cpu.net_proxy_verbs_efa_${_n}
    COMMAND ${MK_MKRUN} -n ${_n} --timeout 120 env SOFTVERBS_EFA=1 MK_NET=verbs MK_NET_TIMEOUT_MS=10000
            $<TARGET_FILE:mk_net_probe>)
endforeach()
set_tests_properties(cpu.verbs_efa_rounds_2 cpu.verbs_efa_rounds_3 cpu.verbs_efa_rounds_4 cpu.verbs_efa_rounds_split_3
  cpu.verbs_efa_dead_peer_3 cpu.verbs_efa_connect_fails_on_one_rank_3 cpu.verbs_efa_no_rnr_retry_2
  cpu.verbs_efa_post_recv_fails_on_one_rank_3
  cpu.net_proxy_verbs_efa_3
  cpu.net_proxy_verbs_efa_4
  PROPERTIES LABELS cpu TIMEOUT 180 ENVIRONMENT_MODIFICATION "${MK_SOFTVERBS_ENV}")
else()
  message(STATUS "softverbs: no <infiniband/efadv.h>: the EFA SRD tests are left out (so is the library's SRD path)")
endif()
set_tests_properties(cpu.verbs_rounds_2 cpu.verbs_rounds_3 cpu.verbs_rounds_4 cpu.verbs_rounds_small_queues_3
  cpu.verbs_rounds_split_3 cpu.verbs_dead_peer_3
  cpu.net_proxy_verbs_2 cpu.net_proxy_verbs_3 cpu.net_proxy_verbs_4
  PROPERTIES LABELS cpu TIMEOUT 180 ENVIRONMENT_MODIFICATION "${MK_SOFTVERBS_ENV}")
