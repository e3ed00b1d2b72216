// The CUDA backend (sim/compute/cuda/cuda_backend.h): the device kernels of
// core/device_kernels.h launched on CUDA streams, the GPU inventory, and an
// all-reduce measurement with NCCL. Compiled with -fmad=false (CMakeLists.txt) so
// that no a*b+c is contracted behind the kernels' back: the only fused
// multiply-adds are the explicit __fmaf_rn of the ordered chains, which the CPU
// computes with its own FMA instructions, and the bits agree (docs/gpu.md).
#include "sim/compute/cuda/cuda_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dtlab {
namespace {

using kernels::Index;

std::string Where(const char* file, int line) {
  std::string path = file;
  const std::size_t slash = path.rfind("sim/cuda/");
  return (slash == std::string::npos ? path : path.substr(slash)) + ":" + std::to_string(line);
}

// CHECK at the CUDA edge: a failed call throws DeviceError naming the call, the
// file and line, and CUDA's own message.
#define DTLAB_CUDA_CHECK(call)                                                                  \
  do {                                                                                          \
    const cudaError_t dtlab_cuda_status = (call);                                               \
    if (dtlab_cuda_status != cudaSuccess)                                                       \
      throw DeviceError(std::string(#call) + " failed at " + Where(__FILE__, __LINE__) + ": " + \
                        cudaGetErrorString(dtlab_cuda_status));                                 \
  } while (0)

#define DTLAB_NCCL_CHECK(call)                                                                  \
  do {                                                                                          \
    const ncclResult_t dtlab_nccl_status = (call);                                              \
    if (dtlab_nccl_status != ncclSuccess)                                                       \
      throw DeviceError(std::string(#call) + " failed at " + Where(__FILE__, __LINE__) + ": " + \
                        ncclGetErrorString(dtlab_nccl_status));                                 \
  } while (0)

// One thread per element, grid-stride so any n fits the grid.
template <class Kernel>
__global__ void ForEach(Index n, Kernel kernel) {
  const Index stride = static_cast<Index>(blockDim.x) * gridDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) kernel(i);
}

constexpr int kThreadsPerBlock = 128;

unsigned Blocks(Index n) {
  return static_cast<unsigned>(std::min<Index>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, Index{1} << 20));
}

// The Device policy of sim/compute/device_runner.h on CUDA: lane l is a stream on GPU
// devices[l % devices.size()].
class CudaDevice {
 public:
  CudaDevice(const std::vector<int>& devices, int streams_per_device) : state_(std::make_shared<State>()) {
    for (int s = 0; s < streams_per_device; ++s)
      for (const int device : devices) {
        DTLAB_CUDA_CHECK(cudaSetDevice(device));
        cudaStream_t stream = nullptr;
        DTLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        state_->lanes.push_back({device, stream});
      }
  }
  int lanes() const { return static_cast<int>(state_->lanes.size()); }
  void* Allocate(int lane, std::size_t bytes) {
    Select(lane);
    void* p = nullptr;
    DTLAB_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
    return p;
  }
  void Free(int lane, void* p) {
    Select(lane);
    cudaFree(p);  // in a destructor: nothing to do about a failure
  }
  void CopyIn(int lane, void* device, const void* host, std::size_t bytes) {
    Select(lane);
    DTLAB_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, Stream(lane)));
  }
  void CopyOut(int lane, void* host, const void* device, std::size_t bytes) {
    Select(lane);
    DTLAB_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, Stream(lane)));
  }
  template <class Kernel>
  void Launch(int lane, Index n, const Kernel& kernel) {
    if (n <= 0) return;
    Select(lane);
    ForEach<<<Blocks(n), kThreadsPerBlock, 0, Stream(lane)>>>(n, kernel);
    DTLAB_CUDA_CHECK(cudaGetLastError());
  }
  void Synchronize(int lane) {
    Select(lane);
    DTLAB_CUDA_CHECK(cudaStreamSynchronize(Stream(lane)));
  }

 private:
  struct Lane {
    int device;
    cudaStream_t stream;
  };
  struct State {
    std::vector<Lane> lanes;
    ~State() {
      for (const Lane& lane : lanes) {
        cudaSetDevice(lane.device);
        cudaStreamDestroy(lane.stream);
      }
    }
  };
  void Select(int lane) { DTLAB_CUDA_CHECK(cudaSetDevice(state_->lanes[static_cast<std::size_t>(lane)].device)); }
  cudaStream_t Stream(int lane) const { return state_->lanes[static_cast<std::size_t>(lane)].stream; }
  std::shared_ptr<State> state_;
};

class CudaRunner final : public DeviceRunner {
 public:
  CudaRunner(DevicePlan plan, CudaDevice device, std::string description)
      : runner_(std::move(plan), std::move(device)), description_(std::move(description)) {}
  std::string Description() const override { return description_; }
  void Run(const DeviceBatch& batch, std::span<const DeviceJob> jobs) override { runner_.Run(batch, jobs); }

 private:
  DeviceRunnerOn<CudaDevice> runner_;
  std::string description_;
};

std::string VersionText(int version) {  // CUDA's 1000 * major + 10 * minor
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

int DeviceCount(std::string& problem) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice) {
    problem = std::string("no CUDA device: no NVIDIA GPU with a working driver on this machine (CUDA says: ") +
              cudaGetErrorString(status) + ")";
    return 0;
  }
  if (status != cudaSuccess) {
    problem = std::string("no CUDA device: ") + cudaGetErrorString(status);
    return 0;
  }
  if (count == 0) problem = "no CUDA device: the CUDA driver reports no GPU on this machine";
  return count;
}

// The expected value of element i of replica r's buffer in the all-reduce
// measurement: small integers, so every sum is exact and any difference is #wrong.
__host__ __device__ std::int64_t Pattern(Index i, int r) { return (i % 1021) * (r + 1) - 500 + r; }

struct FillPattern {
  std::int64_t* data;
  int replica;
  __device__ void operator()(Index i) const { data[i] = Pattern(i, replica); }
};

// out[i] = the sum over replicas of buffers[r][i]; the stream all-reduce's reduction.
struct SumBuffers {
  std::int64_t* const* buffers;
  int replicas;
  std::int64_t* out;
  __device__ void operator()(Index i) const {
    std::int64_t sum = 0;
    for (int r = 0; r < replicas; ++r) sum += buffers[r][i];
    out[i] = sum;
  }
};

std::int64_t CountWrong(const std::vector<std::int64_t>& host, int replicas) {
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    std::int64_t expected = 0;
    for (int r = 0; r < replicas; ++r) expected += Pattern(static_cast<Index>(i), r);
    wrong += host[i] != expected;
  }
  return wrong;
}

}  // namespace

CudaInventory QueryCudaDevices() {
  CudaInventory inventory;
  inventory.built_with_cuda = true;
  int version = 0;
  if (cudaRuntimeGetVersion(&version) == cudaSuccess) inventory.runtime_version = VersionText(version);
  if (cudaDriverGetVersion(&version) == cudaSuccess && version > 0) inventory.driver_version = VersionText(version);
  if (ncclGetVersion(&version) == ncclSuccess)  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch
    inventory.nccl_version = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                             std::to_string(version % 100);
  const int count = DeviceCount(inventory.problem);
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, d) != cudaSuccess) continue;
    CudaDeviceInfo info;
    info.index = d;
    info.name = props.name;
    info.total_memory = props.totalGlobalMem;
    info.compute_major = props.major, info.compute_minor = props.minor;
    info.multiprocessors = props.multiProcessorCount;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess) info.pci_bus_id = bus;
    std::size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(d) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
      info.free_memory = free_bytes;
    inventory.devices.push_back(info);
  }
  inventory.peer_access.assign(inventory.devices.size(), std::vector<bool>(inventory.devices.size(), false));
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < count; ++j) {
      int can = 0;
      if (i != j && cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess)
        inventory.peer_access[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = can != 0;
    }
  return inventory;
}

StatusOr<std::unique_ptr<DeviceRunner>> MakeCudaRunner(DevicePlan plan, const std::vector<int>& devices,
                                                       int streams_per_device) {
  std::string problem;
  const int count = DeviceCount(problem);
  if (count == 0) return Status::NotFound(problem);
  std::vector<int> chosen = devices.empty() ? std::vector<int>{0} : devices;
  std::string names;
  for (const int d : chosen) {
    if (d < 0 || d >= count)
      return Status::InvalidArgument("--devices: there is no CUDA device " + std::to_string(d) + " (this machine has " +
                                     std::to_string(count) + ", numbered from 0; see dtlab devices)");
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, d) != cudaSuccess)
      return Status::Runtime("cannot read the properties of CUDA device " + std::to_string(d));
    if (names.find(props.name) == std::string::npos) names += (names.empty() ? "" : ", ") + std::string(props.name);
  }
  try {
    CudaDevice device(chosen, streams_per_device);
    const std::string description = "cuda: " + std::to_string(chosen.size()) + " x " + names + ", " +
                                    std::to_string(streams_per_device) + " stream" +
                                    (streams_per_device == 1 ? "" : "s") + " per GPU";
    return std::unique_ptr<DeviceRunner>(std::make_unique<CudaRunner>(std::move(plan), std::move(device), description));
  } catch (const DeviceError& e) {
    return Status::Runtime(e.what());
  }
}

StatusOr<AllReduceMeasurement> MeasureCudaAllReduce(const std::vector<int>& devices, int replicas,
                                                    std::int64_t elements) {
  std::string problem;
  const int count = DeviceCount(problem);
  if (count == 0) return Status::NotFound(problem);
  std::vector<int> chosen = devices.empty() ? std::vector<int>{0} : devices;
  AllReduceMeasurement m;
  if (elements <= 0) return Status::InvalidArgument("an all-reduce of no element measures nothing");
  m.bytes = elements * static_cast<std::int64_t>(sizeof(std::int64_t));
  const auto bytes = static_cast<std::size_t>(m.bytes);
  constexpr int kRuns = 5;
  try {
    double best = 1e300;
    std::vector<std::int64_t> host(static_cast<std::size_t>(elements));
    if (chosen.size() >= 2 && static_cast<int>(chosen.size()) == replicas) {
      // One replica per GPU: ncclAllReduce over a communicator of the GPUs.
      m.method = "nccl";
      const int n = replicas;
      std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
      DTLAB_NCCL_CHECK(ncclCommInitAll(comms.data(), n, chosen.data()));
      std::vector<std::int64_t*> buffers(static_cast<std::size_t>(n));
      std::vector<cudaStream_t> streams(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) {
        DTLAB_CUDA_CHECK(cudaSetDevice(chosen[static_cast<std::size_t>(r)]));
        DTLAB_CUDA_CHECK(cudaStreamCreate(&streams[static_cast<std::size_t>(r)]));
        DTLAB_CUDA_CHECK(cudaMalloc(&buffers[static_cast<std::size_t>(r)], std::max<std::size_t>(bytes, 8)));
      }
      for (int run = 0; run <= kRuns; ++run) {  // run 0 warms up
        for (int r = 0; r < n; ++r) {
          DTLAB_CUDA_CHECK(cudaSetDevice(chosen[static_cast<std::size_t>(r)]));
          ForEach<<<Blocks(elements), kThreadsPerBlock, 0, streams[static_cast<std::size_t>(r)]>>>(
              elements, FillPattern{buffers[static_cast<std::size_t>(r)], r});
          DTLAB_CUDA_CHECK(cudaStreamSynchronize(streams[static_cast<std::size_t>(r)]));
        }
        const auto start = std::chrono::steady_clock::now();
        DTLAB_NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < n; ++r)
          DTLAB_NCCL_CHECK(ncclAllReduce(buffers[static_cast<std::size_t>(r)], buffers[static_cast<std::size_t>(r)],
                                         static_cast<std::size_t>(elements), ncclInt64, ncclSum,
                                         comms[static_cast<std::size_t>(r)], streams[static_cast<std::size_t>(r)]));
        DTLAB_NCCL_CHECK(ncclGroupEnd());
        for (int r = 0; r < n; ++r) {
          DTLAB_CUDA_CHECK(cudaSetDevice(chosen[static_cast<std::size_t>(r)]));
          DTLAB_CUDA_CHECK(cudaStreamSynchronize(streams[static_cast<std::size_t>(r)]));
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (run > 0) best = std::min(best, seconds);
      }
      for (int r = 0; r < n; ++r) {
        DTLAB_CUDA_CHECK(cudaSetDevice(chosen[static_cast<std::size_t>(r)]));
        DTLAB_CUDA_CHECK(cudaMemcpy(host.data(), buffers[static_cast<std::size_t>(r)], bytes, cudaMemcpyDeviceToHost));
        m.wrong += CountWrong(host, n);
        cudaFree(buffers[static_cast<std::size_t>(r)]);
        cudaStreamDestroy(streams[static_cast<std::size_t>(r)]);
        ncclCommDestroy(comms[static_cast<std::size_t>(r)]);
      }
    } else {
      // Replicas as buffers of one GPU: a kernel sums them, then copies the sum back
      // into every buffer (a reduce and a broadcast in device memory).
      m.method = "streams";
      DTLAB_CUDA_CHECK(cudaSetDevice(chosen.front()));
      cudaStream_t stream = nullptr;
      DTLAB_CUDA_CHECK(cudaStreamCreate(&stream));
      std::vector<std::int64_t*> buffers(static_cast<std::size_t>(replicas));
      for (auto& b : buffers) DTLAB_CUDA_CHECK(cudaMalloc(&b, std::max<std::size_t>(bytes, 8)));
      std::int64_t* sum = nullptr;
      std::int64_t** table = nullptr;
      DTLAB_CUDA_CHECK(cudaMalloc(&sum, std::max<std::size_t>(bytes, 8)));
      DTLAB_CUDA_CHECK(cudaMalloc(&table, sizeof(std::int64_t*) * buffers.size()));
      DTLAB_CUDA_CHECK(
          cudaMemcpy(table, buffers.data(), sizeof(std::int64_t*) * buffers.size(), cudaMemcpyHostToDevice));
      for (int run = 0; run <= kRuns; ++run) {
        for (int r = 0; r < replicas; ++r)
          ForEach<<<Blocks(elements), kThreadsPerBlock, 0, stream>>>(
              elements, FillPattern{buffers[static_cast<std::size_t>(r)], r});
        DTLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
        const auto start = std::chrono::steady_clock::now();
        ForEach<<<Blocks(elements), kThreadsPerBlock, 0, stream>>>(elements, SumBuffers{table, replicas, sum});
        DTLAB_CUDA_CHECK(cudaGetLastError());
        for (auto* b : buffers) DTLAB_CUDA_CHECK(cudaMemcpyAsync(b, sum, bytes, cudaMemcpyDeviceToDevice, stream));
        DTLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (run > 0) best = std::min(best, seconds);
      }
      for (auto* b : buffers) {
        DTLAB_CUDA_CHECK(cudaMemcpy(host.data(), b, bytes, cudaMemcpyDeviceToHost));
        m.wrong += CountWrong(host, replicas);
        cudaFree(b);
      }
      cudaFree(sum);
      cudaFree(table);
      cudaStreamDestroy(stream);
    }
    m.seconds = best;
    m.algbw = static_cast<double>(m.bytes) / best / 1e9;
    m.busbw = m.algbw * 2.0 * (replicas - 1) / std::max(replicas, 1);
  } catch (const DeviceError& e) {
    return Status::Runtime(e.what());
  }
  return m;
}

}  // namespace dtlab
