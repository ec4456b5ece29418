"""The GPU's SM clock and clock-event reasons while the torchrun benchmarks' timed calls run, read through
NVML (ctypes on the driver's libnvidia-ml.so.1) on a host thread: the Python side of mkbench's bench/gpu_clocks.hpp,
with the same summary line (over the whole run's timed rounds, not per table). Why: a call's time depends on the
GPU's power state. On one H100 back-to-back GEMMs ran
at the power cap (~1400 MHz) and the same GEMMs after a GPU spin took 0-19% less time
(bench/results/session45-gpu-20261205.md). By default these benches sync the host, meet at a barrier and spin
before every call, so their GPU rests between calls; mkbench runs its calls back to back (as torch_tp_bench.py
--back-to-back does). The reports' clock line says which
regime a number comes from; its samples span the barriers and the spins too, so its median is above the clock the
calls themselves ran at. Without NVML the line says why there is none."""
import ctypes
import threading
import time

PERIOD_MS = 10
POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80


def summarize(samples, period_ms=PERIOD_MS):
    """samples: (sm_mhz, reasons) tuples. The same line as mkbench's summarize_clocks ('' without samples):
    median and p10-p90 SM clock (nearest rank) and the share of samples the power cap, thermal slowdown and the
    hardware's slowdowns held back (a sample can count in more than one); no power figure (bench/gpu_clocks.hpp
    says why)."""
    n = len(samples)
    if not n:
        return ""
    v = sorted(s[0] for s in samples)

    def q(f):
        return v[min(n - 1, int(f * (n - 1) + 0.5))]

    def pct(bits):
        return int(100.0 * sum(1 for s in samples if s[1] & bits) / n + 0.5)

    return (f"GPU while the timed rounds ran (rank 0's; barriers and any lead spins included; {n} NVML samples "
            f"every {period_ms} ms): SM clock median {q(0.5)} MHz (p10-p90 {q(0.1)}-{q(0.9)}); the power cap held "
            f"the clock in {pct(POWER_CAP)}% of the samples, thermal slowdown in {pct(SW_THERMAL | HW_THERMAL)}%, "
            f"hardware slowdown in {pct(HW_SLOWDOWN | HW_POWER_BRAKE)}%.")


class ClockSampler:
    """Samples the current CUDA device every PERIOD_MS while started; the samples accumulate over the run (the
    reports' line covers every timed round of the run)."""

    def __init__(self):
        self._lib = self._dev = None
        self._tried, self.why_not, self.limit_mw = False, "", 0
        self.samples, self._stop, self._thread = [], None, None

    def _open(self):
        if self._tried:
            return self._lib is not None
        self._tried = True
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError:
            self.why_not = "not sampled: libnvidia-ml.so.1 (the driver's NVML) could not be opened"
            return False
        try:
            import torch
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".encode()
            dev, limit = ctypes.c_void_p(), ctypes.c_uint(0)
            if lib.nvmlInit_v2() != 0:
                self.why_not = "not sampled: nvmlInit failed"
                return False
            if lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(dev)) != 0:
                lib.nvmlShutdown()
                self.why_not = f"not sampled: NVML has no device at PCI {bus.decode()}"
                return False
            self.limit_mw = limit.value if lib.nvmlDeviceGetEnforcedPowerLimit(dev, ctypes.byref(limit)) == 0 else 0
            self._reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                lib.nvmlDeviceGetCurrentClocksThrottleReasons
        except Exception as e:  # noqa: BLE001 - no device, an NVML without an entry point: the line says why
            self.why_not = f"not sampled: {type(e).__name__}: {e}"
            return False
        self._lib, self._dev = lib, dev
        return True

    def status(self):
        if not self._open():
            return self.why_not
        return (f"NVML every {PERIOD_MS} ms on a host thread while the timed rounds run (rank 0's GPU): SM clock and "
                f"clock-event reasons; enforced power limit {self.limit_mw // 1000} W")

    def start(self):
        if self._thread is not None or not self._open():
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None

    def _run(self):
        lib, dev = self._lib, self._dev
        mhz, why = ctypes.c_uint(), ctypes.c_ulonglong()
        while not self._stop.is_set():
            if lib.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(mhz)) == 0 and \
                    self._reasons(dev, ctypes.byref(why)) == 0:  # (1: NVML_CLOCK_SM)
                self.samples.append((mhz.value, why.value))
            time.sleep(PERIOD_MS / 1000)

    def summary(self):
        """The line for every sample so far, or why there are none."""
        return summarize(list(self.samples)) or self.status()


SAMPLER = ClockSampler()
