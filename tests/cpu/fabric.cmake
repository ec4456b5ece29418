# fabric transport (src/net/fabric): multi-process probes on loopback through
# tools/mkrun; included by tests/CMakeLists.txt. Provider names use '+' for
# ';' (tcp+ofi_rxm = "tcp;ofi_rxm"), which CMake would split.
# (mk_fabric_probe: tests/CMakeLists.txt)

# All-to-all rounds: 8 B .. 4 MiB, Set and Add signals, data checked when its
# signal is seen. Ordered signals (default), deferred signals, and the
# sockets provider (which has atomics: exercises fi_atomic for Add).
foreach(_n 2 3 4)
  add_test(NAME cpu.fabric_rounds_${_n}
    COMMAND ${MK_MKRUN} -n ${_n} --timeout 150 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm)
endforeach()
add_test(NAME cpu.fabric_rounds_deferred_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 150 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm --deferred)
add_test(NAME cpu.fabric_rounds_sockets_atomics_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 150 $<TARGET_FILE:mk_fabric_probe> --provider sockets --rounds 4)
set_tests_properties(cpu.fabric_rounds_2 cpu.fabric_rounds_3 cpu.fabric_rounds_4 cpu.fabric_rounds_deferred_3
  cpu.fabric_rounds_sockets_atomics_3 PROPERTIES LABELS cpu TIMEOUT 180)

# Fault injection: a rank killed mid-stream, and an unreachable peer at
# connect. The probe exits 0 only when the expected error (naming the rank)
# arrived within MK_NET_TIMEOUT_MS + slack.
add_test(NAME cpu.fabric_dead_peer_2
  COMMAND ${MK_MKRUN} -n 2 --timeout 60 env MK_NET_TIMEOUT_MS=2000 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm --kill-rank 1)
add_test(NAME cpu.fabric_dead_peer_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env MK_NET_TIMEOUT_MS=2000 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm --kill-rank 1)
add_test(NAME cpu.fabric_unreachable_peer
  COMMAND ${MK_MKRUN} -n 2 --timeout 60 env MK_NET_TIMEOUT_MS=2000 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm --unreachable-rank 1)
# A rank whose connect fails before its hellos: every rank fails at once naming it (not, after MK_NET_TIMEOUT_MS,
# calling it unreachable).
add_test(NAME cpu.fabric_connect_fails_on_one_rank
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env MK_NET_TIMEOUT_MS=30000 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm
          --bad-peer-rank 1 --expect-error "fabric connect: rank 1 could not add its peers' addresses: fabric: rank 1: connect: bad peer rank 1")
set_tests_properties(cpu.fabric_dead_peer_2 cpu.fabric_dead_peer_3 cpu.fabric_unreachable_peer
  cpu.fabric_connect_fails_on_one_rank PROPERTIES LABELS cpu TIMEOUT 90)

# Variants: rxm's emulated atomics for Add (tcp;ofi_rxm then grants no WAW
# ordering, so signals take the deferred path), and a peer that is alive but
# stops polling (only the request-age bound can catch it).
add_test(NAME cpu.fabric_rounds_atomics_deferred_2
  COMMAND ${MK_MKRUN} -n 2 --timeout 150 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm --prefer-atomics)
set_tests_properties(cpu.fabric_rounds_atomics_deferred_2 PROPERTIES LABELS cpu TIMEOUT 180)
add_test(NAME cpu.fabric_stalled_peer_3
  COMMAND ${MK_MKRUN} -n 3 --timeout 60 env MK_NET_TIMEOUT_MS=2000 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm --stall-rank 1)
set_tests_properties(cpu.fabric_stalled_peer_3 PROPERTIES LABELS cpu TIMEOUT 90)
# A peer that completes writes slowly but steadily (it polls every 125 ms): writes queued behind others wait
# ~3 s, past the 1 s bound, and must not be taken for a dead peer (the bound counts from the peer's last completed
# operation when that is later than the post; before session 46 this failed after 1 s).
add_test(NAME cpu.fabric_slow_peer_2
  COMMAND ${MK_MKRUN} -n 2 --timeout 60 env MK_NET_TIMEOUT_MS=1000 $<TARGET_FILE:mk_fabric_probe> --provider tcp+ofi_rxm
          --slow-rank 1)
set_tests_properties(cpu.fabric_slow_peer_2 PROPERTIES LABELS cpu TIMEOUT 90)
