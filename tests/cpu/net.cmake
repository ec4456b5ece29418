# Command ring + host proxy + fabric transport between processes (host memory);
# verbs.cmake runs the same probe over verbs.
add_executable(mk_net_probe ${CMAKE_CURRENT_SOURCE_DIR}/cpu/net_probe.cpp)
target_link_libraries(mk_net_probe PRIVATE mkernel)
foreach(_n 2 3 4)
  add_test(NAME cpu.net_proxy_fabric_${_n}
    COMMAND ${MK_MKRUN} -n ${_n} --timeout 120 env MK_NET=fabric MK_FI_PROVIDER=tcp\;ofi_rxm MK_NET_TIMEOUT_MS=10000
            $<TARGET_FILE:mk_net_probe>)
  set_tests_properties(cpu.net_proxy_fabric_${_n} PROPERTIES LABELS cpu TIMEOUT 150)
endforeach()
