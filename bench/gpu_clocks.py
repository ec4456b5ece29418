"""The GPU's SM clock, power and clock-event reasons while the torchrun benchmarks' timed calls run, read through
NVML (ctypes on the driver's libnvidia-ml.so.1) on a host thread: the Python side of mkbench's bench/gpu_clocks.hpp,
with the same summary line. Why: a call's time depends on the GPU's power state. On one H100 back-to-back GEMMs ran
at the power cap (~1400 MHz) and the same GEMMs after a GPU spin ran at ~1965 MHz, 5-19% faster
(bench/results/session45-gpu-20261205.md). These benches sync the host, meet at a barrier and spin before every
call, so their GPU rests between calls; mkbench runs its calls back to back. The reports' clock line says which
regime a number comes from. Without NVML the line says why there is none."""
import ctypes
import threading
import time

PERIOD_MS = 10
POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80


def summarize(samples, limit_mw, period_ms=PERIOD_MS):
    """samples: (sm_mhz, power_mw, reasons) tuples. The same line as mkbench's summarize_clocks ('' without
    samples): median and p10-p90 SM clock (nearest rank), median power of the limit, the share of samples held
    back by the power cap, by thermal slowdown and by the hardware's slowdowns."""
    n = len(samples)
    if not n:
        return ""

    def q(i, f):
        v = sorted(s[i] for s in samples)
        return v[min(n - 1, int(f * (n - 1) + 0.5))]

    def pct(bits):
        return int(100.0 * sum(1 for s in samples if s[2] & bits) / n + 0.5)

    limit = f" of a {limit_mw // 1000} W limit" if limit_mw else ""
    return (f"GPU during the timed calls (rank 0's, {n} NVML samples every {period_ms} ms): SM clock median "
            f"{q(0, 0.5)} MHz (p10-p90 {q(0, 0.1)}-{q(0, 0.9)}), power median {q(1, 0.5) // 1000} W{limit}; held at "
            f"the power cap in {pct(POWER_CAP)}% of the samples, by thermal slowdown in "
            f"{pct(SW_THERMAL | HW_THERMAL)}%, by hardware slowdown in {pct(HW_SLOWDOWN | HW_POWER_BRAKE)}%.")


class ClockSampler:
    """Samples the current CUDA device every PERIOD_MS while started; the samples accumulate over the run."""

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
        return (f"NVML every {PERIOD_MS} ms on a host thread while the timed calls run (rank 0's GPU): SM clock, "
                f"power, clock-event reasons; enforced power limit {self.limit_mw // 1000} W")

    def start(self):
        if self._thread is not None or not self._open():
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _run(self):
        lib, dev = self._lib, self._dev
        mhz, mw, why = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        while not self._stop.is_set():
            if (lib.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(mhz)) == 0  # NVML_CLOCK_SM
                    and lib.nvmlDeviceGetPowerUsage(dev, ctypes.byref(mw)) == 0
                    and self._reasons(dev, ctypes.byref(why)) == 0):
                self.samples.append((mhz.value, mw.value, why.value))
            time.sleep(PERIOD_MS / 1000)

    def summary(self):
        """The line for every sample so far, or why there are none."""
        return summarize(list(self.samples), self.limit_mw) or self.status()


SAMPLER = ClockSampler()
