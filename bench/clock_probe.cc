// Prints the core clock in GHz, measured with a chain of dependent register-to-
// register integer adds (one per cycle): the frequency the cores actually run at,
// turbo included, which /proc/cpuinfo does not show in a virtual machine. Printed
// by bench/compare_torch.sh beside the measured FMA peak (bench/fma_peak).
// Register-to-register: a chain of `add $1` is folded by some cores (an Intel Xeon
// with AVX-512 FP16 here ran it at "17 GHz"); `add x, x` and a chain of imul
// (3 cycles each) agree on it.
#include <chrono>
#include <cstdio>

int main() {
  constexpr unsigned long kAdds = 2'000'000'000UL;
  unsigned long x = 1;
  const auto start = std::chrono::steady_clock::now();
  // Eight dependent adds per iteration, so loop overhead does not limit the rate.
  for (unsigned long i = 0; i < kAdds / 8; ++i)
    __asm__ volatile(
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0"
        : "+r"(x));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.2f\n", static_cast<double>(kAdds) / seconds / 1e9);
  return 0;
}
