#include "sim/mpi_group.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include <tbb/parallel_for.h>

#include "sim/combine.h"
#include "sim/transport.h"

namespace dtlab {

namespace {

using Clock = std::chrono::steady_clock;

std::string MpiError(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(length));
}

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

// Requests in flight, each with the rank it waits for and a description of the
// message for errors. Wait polls them until done or the deadline.
class Requests {
 public:
  void Add(MPI_Request request, int peer, std::string what) {
    requests_.push_back(request);
    peers_.push_back(peer);
    what_.push_back(std::move(what));
  }
  bool empty() const { return requests_.empty(); }
  // Waits for requests [first, end); Runtime after the deadline, naming the first
  // one still pending.
  Status Wait(std::size_t first, std::size_t end, Clock::time_point deadline,
              const std::function<std::string(int)>& describe_peer, double timeout_seconds) {
    const int count = static_cast<int>(end - first);
    if (count == 0) return Status::Ok();
    for (long spins = 0;; ++spins) {
      int done = 0;
      const int code = MPI_Testall(count, requests_.data() + first, &done, MPI_STATUSES_IGNORE);
      if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Testall"));
      if (done) return Status::Ok();
      if (Clock::now() > deadline) {
        for (std::size_t i = first; i < end; ++i) {
          int complete = 0;
          if (requests_[i] != MPI_REQUEST_NULL) MPI_Test(&requests_[i], &complete, MPI_STATUS_IGNORE);
          if (requests_[i] == MPI_REQUEST_NULL || complete) continue;
          return Status::Runtime("timed out after " + Seconds(timeout_seconds) + " s waiting for " +
                                 describe_peer(peers_[i]) + ", which stopped responding (" + what_[i] +
                                 "); raise --collective-timeout if it is only slow");
        }
      }
      if (spins > 2000) sched_yield();  // oversubscribed ranks: let the peer run
    }
  }
  std::size_t size() const { return requests_.size(); }
  void Clear() {
    requests_.clear();
    peers_.clear();
    what_.clear();
  }

 private:
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
  std::vector<std::string> what_;
};

// The Transport (sim/transport.h) of the replicas of all ranks: rank w holds
// replicas [w*R, (w+1)*R) and their buffers. Run carries out one phase: addends
// held by another rank than the combiner's come as messages (tag 2k), results
// stored on another rank go as messages (tag 2k+1), where k counts phases.
template <typename T>
class MpiTransport final : public Transport<T> {
 public:
  MpiTransport(std::span<const std::span<T>> local, std::int32_t replicas, std::int32_t rank, std::int64_t* phases,
               double timeout_seconds, MessageLog* log, std::int64_t step, std::string collective)
      : local_(local),
        replicas_(replicas),
        per_rank_(static_cast<std::int32_t>(local.size())),
        rank_(rank),
        phases_(phases),
        timeout_seconds_(timeout_seconds),
        log_(log),
        step_(step),
        collective_(std::move(collective)) {}

  std::int32_t num_replicas() const override { return replicas_; }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    dropping_ = count == 0;
    if (!dropping_) transfers_.push_back({combiner, count, divide, {}, {}});
  }
  void AddSource(std::int32_t replica, BufferRole, std::int64_t offset, std::int32_t phase) override {
    // In place: a replica's input is its output.
    if (!dropping_) transfers_.back().sources.push_back({replica, offset, phase});
  }
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) override {
    if (!dropping_) transfers_.back().destinations.push_back({replica, offset, phase});
  }
  void Run() override {
    const std::int64_t phase_number = (*phases_)++;
    if (status_.ok()) status_ = RunPhase(static_cast<int>((phase_number % 8192) * 2));
    transfers_.clear();
  }
  const Status& status() const { return status_; }

 private:
  struct Place {
    std::int32_t replica;
    std::int64_t offset;
    std::int32_t phase;
  };
  struct Transfer {
    std::int32_t combiner;
    std::int64_t count;
    bool divide;
    std::vector<Place> sources, destinations;
  };
  int Owner(std::int32_t replica) const { return replica / per_rank_; }
  T* Data(std::int32_t replica, std::int64_t offset) const {
    return local_[static_cast<std::size_t>(replica % per_rank_)].data() + offset;
  }
  std::string Message(const Place& place, std::int32_t sender, std::int32_t receiver, std::int64_t count) const {
    return collective_ + " at step " + std::to_string(step_) + ": the message replica " + std::to_string(sender) +
           " -> replica " + std::to_string(receiver) + " of phase " + std::to_string(place.phase + 1) + ", " +
           std::to_string(count) + " elements";
  }
  std::string DescribeRank(int rank) const {
    const int first = rank * per_rank_;
    return "rank " + std::to_string(rank) + " (worker " + std::to_string(rank) + ", replica" +
           (per_rank_ == 1 ? " " + std::to_string(first)
                           : "s " + std::to_string(first) + "-" + std::to_string(first + per_rank_ - 1)) +
           ")";
  }
  Status Post(bool send, void* data, std::int64_t count, int peer, int tag, std::string what) {
    const std::int64_t bytes = count * static_cast<std::int64_t>(sizeof(T));
    if (bytes > INT_MAX) return Status::Runtime(collective_ + ": a message of " + std::to_string(bytes) +
                                                " bytes exceeds MPI's int count; use more replicas or workers");
    MPI_Request request;
    const int code = send ? MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &request)
                          : MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, send ? "MPI_Isend" : "MPI_Irecv"));
    requests_.Add(request, peer, std::move(what));
    return Status::Ok();
  }

  Status RunPhase(int tag) {
    if (log_ != nullptr) RecordMessages();
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
    requests_.Clear();
    auto describe = [this](int rank) { return DescribeRank(rank); };
    // 1. Receives: remote addends of the transfers this rank combines (into staging
    //    buffers), and results of remote combiners stored into this rank's replicas.
    std::size_t staged = 0;
    std::vector<std::size_t> first_request(transfers_.size(), 0), end_request(transfers_.size(), 0);
    std::vector<std::vector<const T*>> addends(transfers_.size());
    for (std::size_t t = 0; t < transfers_.size(); ++t) {
      const Transfer& transfer = transfers_[t];
      if (Owner(transfer.combiner) != rank_) continue;
      first_request[t] = requests_.size();
      for (const Place& s : transfer.sources) {
        if (Owner(s.replica) == rank_) {
          addends[t].push_back(Data(s.replica, s.offset));
          continue;
        }
        if (staging_.size() <= staged) staging_.emplace_back();
        std::vector<T>& buffer = staging_[staged++];
        if (buffer.size() < static_cast<std::size_t>(transfer.count)) buffer.resize(static_cast<std::size_t>(transfer.count));
        addends[t].push_back(buffer.data());
        DTLAB_RETURN_IF_ERROR(Post(false, buffer.data(), transfer.count, Owner(s.replica), tag,
                                   Message(s, s.replica, transfer.combiner, transfer.count)));
      }
      end_request[t] = requests_.size();
    }
    for (const Transfer& transfer : transfers_) {
      if (Owner(transfer.combiner) == rank_) continue;
      for (const Place& d : transfer.destinations)
        if (Owner(d.replica) == rank_)
          DTLAB_RETURN_IF_ERROR(Post(false, Data(d.replica, d.offset), transfer.count, Owner(transfer.combiner), tag + 1,
                                     Message(d, transfer.combiner, d.replica, transfer.count)));
    }
    // 2. Sends of this rank's addends to remote combiners.
    for (const Transfer& transfer : transfers_) {
      if (Owner(transfer.combiner) == rank_) continue;
      for (const Place& s : transfer.sources)
        if (Owner(s.replica) == rank_)
          DTLAB_RETURN_IF_ERROR(Post(true, Data(s.replica, s.offset), transfer.count, Owner(transfer.combiner), tag,
                                     Message(s, s.replica, transfer.combiner, transfer.count)));
    }
    // 3. Each transfer this rank combines, once its addends are in: the sum, stored
    //    locally and sent to the remote destinations.
    std::size_t results = 0;
    for (std::size_t t = 0; t < transfers_.size(); ++t) {
      const Transfer& transfer = transfers_[t];
      if (Owner(transfer.combiner) != rank_) continue;
      DTLAB_RETURN_IF_ERROR(requests_.Wait(first_request[t], end_request[t], deadline, describe, timeout_seconds_));
      std::vector<T*> to;
      for (const Place& d : transfer.destinations)
        if (Owner(d.replica) == rank_) to.push_back(Data(d.replica, d.offset));
      const bool remote = to.size() < transfer.destinations.size();
      if (remote && to.empty()) {  // nowhere local to keep the sum: stage it
        if (results_.size() <= results) results_.emplace_back();
        std::vector<T>& buffer = results_[results++];
        if (buffer.size() < static_cast<std::size_t>(transfer.count)) buffer.resize(static_cast<std::size_t>(transfer.count));
        to.push_back(buffer.data());
      }
      Combine(addends[t], to, transfer.count, transfer.divide);
      for (const Place& d : transfer.destinations)
        if (Owner(d.replica) != rank_)
          DTLAB_RETURN_IF_ERROR(Post(true, to[0], transfer.count, Owner(d.replica), tag + 1,
                                     Message(d, transfer.combiner, d.replica, transfer.count)));
    }
    // 4. Everything else: results arriving here, sends leaving.
    return requests_.Wait(0, requests_.size(), deadline, describe, timeout_seconds_);
  }

  void Combine(const std::vector<const T*>& sources, const std::vector<T*>& destinations, std::int64_t count,
               bool divide) const {
    constexpr std::int64_t kBlock = std::max<std::int64_t>(64 * 1024 / static_cast<std::int64_t>(sizeof(T)), 1);
    const T divisor = static_cast<T>(replicas_);
    auto block = [&](std::int64_t begin, std::int64_t end) {
      CombineRange<T>(
          sources.size(), [&](std::size_t s) { return sources[s]; }, destinations.size(),
          [&](std::size_t d) { return destinations[d]; }, begin, end, divide, divisor);
    };
    if (count <= kBlock) {
      block(0, count);
      return;
    }
    tbb::parallel_for(std::int64_t{0}, (count + kBlock - 1) / kBlock,
                      [&](std::int64_t b) { block(b * kBlock, std::min(count, (b + 1) * kBlock)); });
  }

  void RecordMessages() {
    for (const Transfer& t : transfers_) {
      const std::int64_t bytes = t.count * static_cast<std::int64_t>(sizeof(T));
      for (const Place& s : t.sources)
        if (s.replica != t.combiner) log_->Record({s.phase, s.replica, t.combiner, bytes});
      for (const Place& d : t.destinations)
        if (d.replica != t.combiner) log_->Record({d.phase, t.combiner, d.replica, bytes});
    }
  }

  std::span<const std::span<T>> local_;
  std::int32_t replicas_, per_rank_, rank_;
  std::int64_t* phases_;
  double timeout_seconds_;
  MessageLog* log_;
  std::int64_t step_;
  std::string collective_;
  bool dropping_ = false;
  std::vector<Transfer> transfers_;
  Requests requests_;
  std::vector<std::vector<T>> staging_, results_;
  Status status_;
};

}  // namespace

StatusOr<std::unique_ptr<MpiWorkerGroup>> MpiWorkerGroup::Create(int* argc, char*** argv, double timeout_seconds) {
  int provided = 0;
  int code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Init_thread"));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiWorkerGroup> group(new MpiWorkerGroup());
  MPI_Comm_rank(MPI_COMM_WORLD, &group->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &group->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  group->host_.assign(name, static_cast<std::size_t>(length));
  group->timeout_seconds_ = timeout_seconds;
  return group;
}

MpiWorkerGroup::~MpiWorkerGroup() {
  if (finish_) MPI_Finalize();
}

Status MpiWorkerGroup::AllGather(std::span<const std::byte> mine, std::span<std::byte> all,
                                 std::span<const std::size_t> bytes_per_rank, std::string_view what,
                                 std::int64_t step) {
  std::vector<std::size_t> offsets(static_cast<std::size_t>(size_) + 1, 0);
  for (int r = 0; r < size_; ++r) offsets[static_cast<std::size_t>(r) + 1] = offsets[static_cast<std::size_t>(r)] + bytes_per_rank[static_cast<std::size_t>(r)];
  std::memcpy(all.data() + offsets[static_cast<std::size_t>(rank_)], mine.data(), mine.size());
  // Tags above the all-reduce's (which are below 16384).
  const int tag = 16384 + static_cast<int>(phases_++ % 8192);
  Requests requests;
  const std::string label = std::string(what) + (step > 0 ? " at step " + std::to_string(step) : "");
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request request;
    int code = MPI_Irecv(all.data() + offsets[static_cast<std::size_t>(r)], static_cast<int>(bytes_per_rank[static_cast<std::size_t>(r)]),
                         MPI_BYTE, r, tag, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Irecv"));
    requests.Add(request, r, label + ": its part never arrived");
    code = MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, r, tag, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Isend"));
    requests.Add(request, r, label + ": it did not take this rank's part");
  }
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds_));
  return requests.Wait(0, requests.size(), deadline, [](int r) { return "rank " + std::to_string(r); },
                       timeout_seconds_);
}

template <typename T>
Status MpiWorkerGroup::RunAllReduce(std::span<const std::span<T>> local, std::int32_t replicas, ReduceOp op,
                                    const CollectiveOptions& options) {
  const std::string name = "all_reduce/" + std::string(AllReduceAlgorithmName(options.algorithm));
  const std::int64_t count = local.empty() ? 0 : static_cast<std::int64_t>(local[0].size());
  if (options.log != nullptr)
    options.log->Begin(name, options.step, replicas, count * static_cast<std::int64_t>(sizeof(T)));
  MpiTransport<T> transport(local, replicas, rank_, &phases_, timeout_seconds_, options.log, options.step, name);
  ScheduleAllReduce<T>(transport, options.algorithm, count, op, options.replicas_per_worker);
  if (options.log != nullptr) options.log->End();
  return transport.status();
}

Status MpiWorkerGroup::AllReduce(std::span<const std::span<float>> local, std::int32_t replicas, ReduceOp op,
                                 const CollectiveOptions& options) {
  return RunAllReduce<float>(local, replicas, op, options);
}

Status MpiWorkerGroup::AllReduce(std::span<const std::span<std::int64_t>> local, std::int32_t replicas, ReduceOp op,
                                 const CollectiveOptions& options) {
  return RunAllReduce<std::int64_t>(local, replicas, op, options);
}

}  // namespace dtlab
