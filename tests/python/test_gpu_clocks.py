"""CPU: the torchrun benches' clock line (bench/gpu_clocks.py) says what mkbench's says for the same samples
(tests/cpu/test_bench_timing.cpp has the same cases), and without NVML it says why there is none."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import gpu_clocks  # noqa: E402


def test_no_samples_no_line():
    assert gpu_clocks.summarize([]) == ""


def test_median_spread_power_and_the_share_of_each_slowdown():
    reasons = [0x4, 0x4 | 0x20, 0x4, 0x4, 0x40, 0x80, 0x1, 0x1, 0x1, 0]
    samples = [(1000 + 100 * ((i * 7) % 10), reasons[i]) for i in range(10)]
    line = gpu_clocks.summarize(samples, 10)
    for part in ("10 NVML samples every 10 ms", "SM clock median 1500 MHz (p10-p90 1100-1800);",
                 "power cap held the clock in 40% of the samples", "thermal slowdown in 20%",
                 "hardware slowdown in 10%"):
        assert part in line, (part, line)


def test_one_sample():
    line = gpu_clocks.summarize([(1980, 0)], 10)
    assert "SM clock median 1980 MHz (p10-p90 1980-1980); the power cap held the clock in 0%" in line


def test_without_nvml_the_summary_says_why(monkeypatch):
    def no_lib(name):
        raise OSError(f"{name}: cannot open shared object file")
    monkeypatch.setattr(gpu_clocks.ctypes, "CDLL", no_lib)
    s = gpu_clocks.ClockSampler()
    s.start()  # nothing to start: no thread, no samples
    s.stop()
    assert s.samples == [] and s.summary().startswith("not sampled: libnvidia-ml.so.1")
