# Command ring + host proxy + fabric transport between processes (host memory);
# verbs.cmake runs the same probe over verbs.
add_executable(mk_net_probe ${CMAKE_CURRENT_SOURCE_DIR}/cpu/net_probe.cpp)
target_link_libraries(mk_net_probe PRIVATE mkernel)
if(fabric IN_LIST MK_NET_BUILT_BACKENDS)
  foreach(_n 2 3 4)
    add_test(NAME cpu.net_proxy_fabric_${_n}
      COMMAND ${MK_MKRUN} -n ${_n} --timeout 120 env MK_NET=fabric MK_FI_PROVIDER=tcp\;ofi_rxm MK_NET_TIMEOUT_MS=10000
              $<TARGET_FILE:mk_net_probe>)
    set_tests_properties(cpu.net_proxy_fabric_${_n} PROPERTIES LABELS cpu TIMEOUT 150)
  endforeach()
endif()
# A backend this build left out (MK_NET_BACKENDS): asked for by name, every rank refuses at once saying so; MK_NET=auto
# on CPUs alone (no emu) names it among what it tried. tools/check_no_rdma_build.sh runs these in a build of neither.
foreach(_b verbs fabric)
  if(NOT _b IN_LIST MK_NET_BUILT_BACKENDS)
    add_test(NAME cpu.net_refuses_absent_${_b}
      COMMAND ${MK_MKRUN} -n 2 --timeout 30 env MK_NET=${_b} $<TARGET_FILE:mk_net_probe>)
    set_tests_properties(cpu.net_refuses_absent_${_b} PROPERTIES LABELS cpu TIMEOUT 60
      PASS_REGULAR_EXPRESSION "mkernel: this libmkernel was built without the ${_b} network backend")
    list(APPEND _mk_absent ${_b})
  endif()
endforeach()
if("verbs" IN_LIST _mk_absent AND "fabric" IN_LIST _mk_absent)
  add_test(NAME cpu.net_auto_names_absent_backends
    COMMAND ${MK_MKRUN} -n 2 --timeout 30 env MK_NET=auto $<TARGET_FILE:mk_net_probe>)
  set_tests_properties(cpu.net_auto_names_absent_backends PROPERTIES LABELS cpu TIMEOUT 60
    PASS_REGULAR_EXPRESSION
      "no usable network transport:\n  verbs: this libmkernel was built without[^\n]*\n  fabric: this")
endif()
