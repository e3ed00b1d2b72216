#include "sim/comm/mpi_group.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <functional>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include <tbb/parallel_for.h>

#include "core/huge_pages.h"
#include "sim/comm/combine.h"
#include "sim/comm/transport.h"

namespace dtlab {

namespace {

using Clock = std::chrono::steady_clock;

// Transfers larger than this move in segments of this size (see RunPhase). Smaller
// segments (128 KiB, 1 MiB) measured slower on 2 ranks (per-message cost).
constexpr std::int64_t kSegmentBytes = 4 << 20;

std::string MpiError(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(length));
}

// The time `seconds` from now.
Clock::time_point Deadline(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

// Liveness probes. A rank that times out asks every other rank whether it is
// there; every rank answers probes whenever it polls (in every wait below), so the
// ranks that do not answer within a short grace period are the ones that stopped.
// This tells a stalled rank from one that is only waiting for it in turn.
constexpr int kProbeTag = 31000, kAnswerTag = 31001;
int world_rank = 0, world_size = 1;  // this process's, set by MpiWorkerGroup::Create

void AnswerProbes() {
  for (;;) {
    int found = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kProbeTag, MPI_COMM_WORLD, &found, &status) != MPI_SUCCESS || !found) return;
    int asker = 0;
    MPI_Recv(&asker, 1, MPI_INT, status.MPI_SOURCE, kProbeTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request request;
    if (MPI_Isend(&world_rank, 1, MPI_INT, status.MPI_SOURCE, kAnswerTag, MPI_COMM_WORLD, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    text += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return text;
}

// After a timeout waiting for `waited_for`: probes every other rank for up to
// `grace` seconds and says which ones did not answer.
std::string ProbeOthers(int waited_for, double grace) {
  for (int r = 0; r < world_size; ++r) {
    if (r == world_rank) continue;
    MPI_Request request;
    if (MPI_Isend(&world_rank, 1, MPI_INT, r, kProbeTag, MPI_COMM_WORLD, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
  std::vector<char> answered(static_cast<std::size_t>(world_size), 0);
  answered[static_cast<std::size_t>(world_rank)] = 1;
  int answers = 1;
  const auto deadline = Deadline(grace);
  while (answers < world_size && Clock::now() < deadline) {
    AnswerProbes();
    int found = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, MPI_COMM_WORLD, &found, &status) == MPI_SUCCESS && found) {
      int who = 0;
      MPI_Recv(&who, 1, MPI_INT, status.MPI_SOURCE, kAnswerTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!answered[static_cast<std::size_t>(status.MPI_SOURCE)])
        answered[static_cast<std::size_t>(status.MPI_SOURCE)] = 1, ++answers;
    } else {
      sched_yield();
    }
  }
  std::vector<int> silent;
  for (int r = 0; r < world_size; ++r)
    if (!answered[static_cast<std::size_t>(r)]) silent.push_back(r);
  const std::string probe = "a probe within " + Seconds(grace) + " s";
  if (silent.empty())
    return "every other rank answered " + probe + ", so rank " + std::to_string(waited_for) +
           " is alive but slow, or waiting itself";
  const bool waited_silent = std::find(silent.begin(), silent.end(), waited_for) != silent.end();
  return RankList(silent) + " did not answer " + probe + ": " + (silent.size() == 1 ? "it" : "they") +
         " stopped responding" +
         (waited_silent ? "" : " (rank " + std::to_string(waited_for) + " answered: it was waiting too)");
}

// Requests in flight, each with the rank it waits for and a description of the
// message for errors. Wait polls them until done or the deadline.
class Requests {
 public:
  // `what` describes the message; `describe(what)` makes it words (only on failure).
  using Describe = std::function<std::string(std::int64_t)>;
  void Add(MPI_Request request, int peer, std::int64_t what) {
    requests_.push_back(request);
    peers_.push_back(peer);
    what_.push_back(what);
  }
  void set_describe(Describe describe) { describe_ = std::move(describe); }
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
                                 describe_peer(peers_[i]) + " (" + describe_(what_[i]) + "); " +
                                 ProbeOthers(peers_[i], std::min(1.0, timeout_seconds)) +
                                 "; raise --collective-timeout if it is only slow");
        }
      }
      if (spins > 64) {
        AnswerProbes();
        sched_yield();  // ranks may share cores: let the peer run
      }
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
  std::vector<std::int64_t> what_;
  Describe describe_;
};

// The Transport (sim/comm/transport.h) of the replicas of all ranks: rank w holds
// replicas [w*R, (w+1)*R) and their buffers. Run carries out one phase: addends
// held by another rank than the combiner's come as messages (tag 2k), results
// stored on another rank go as messages (tag 2k+1), where k counts phases. In
// place, or, where `inputs` is not empty, out of place: a source read as
// BufferRole::kInput is read from inputs (one per local replica), never written.
template <typename T>
class MpiTransport final : public Transport<T> {
 public:
  MpiTransport(std::span<const std::span<T>> local, std::int32_t replicas, std::int32_t rank, std::int64_t* phases,
               double timeout_seconds, MessageLog* log, std::int64_t step, std::string collective,
               std::vector<HugePageVector<T>>& staging, std::vector<HugePageVector<T>>& results,
               std::span<const std::span<const T>> inputs = {})
      : local_(local),
        inputs_(inputs),
        replicas_(replicas),
        per_rank_(static_cast<std::int32_t>(local.size())),
        rank_(rank),
        phases_(phases),
        timeout_seconds_(timeout_seconds),
        log_(log),
        step_(step),
        collective_(std::move(collective)),
        staging_(staging),
        results_(results) {}

  std::int32_t num_replicas() const override { return replicas_; }
  void BeginTransfer(std::int32_t combiner, std::int64_t count, bool divide) override {
    dropping_ = count == 0;
    if (!dropping_) transfers_.push_back({combiner, count, divide, {}, {}});
  }
  void AddSource(std::int32_t replica, BufferRole role, std::int64_t offset, std::int32_t phase) override {
    // In place, a replica's input is its output.
    if (!dropping_)
      transfers_.back().sources.push_back({replica, offset, phase, !inputs_.empty() && role == BufferRole::kInput});
  }
  void AddDestination(std::int32_t replica, std::int64_t offset, std::int32_t phase) override {
    if (!dropping_) transfers_.back().destinations.push_back({replica, offset, phase, false});
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
    bool input;  // read from inputs_ (a source, out of place)
  };
  struct NotedMessage {
    Place place;
    std::int32_t sender, receiver;
    std::int64_t count;
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
  // A source's elements: only ever read (MPI_Isend takes them as they are).
  T* Source(const Place& place) const {
    if (!place.input) return Data(place.replica, place.offset);
    return const_cast<T*>(inputs_[static_cast<std::size_t>(place.replica % per_rank_)].data() + place.offset);
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
  // Where this rank combines `transfer` from a single addend held by another rank,
  // into one local destination, undivided: that destination, into which the addend
  // is received as it is (a copy and a pass over the elements saved: the compact
  // exact all-reduce's reduce-scatter between two ranks). Else null.
  T* DirectDestination(const Transfer& transfer) const {
    if (transfer.sources.size() != 1 || transfer.divide || Owner(transfer.sources[0].replica) == rank_) return nullptr;
    T* at = nullptr;
    for (const Place& d : transfer.destinations)
      if (Owner(d.replica) == rank_) {
        if (at != nullptr) return nullptr;
        at = Data(d.replica, d.offset);
      }
    return at;
  }
  // Where this rank combines `transfer` from a single addend of its own, undivided,
  // for remote destinations alone: the addend, sent as it is (an all-gather's slice:
  // a copy into a staging buffer saved, 8 MB a call for a 16 MiB compact exact
  // all-reduce between two ranks). No message of the phase lands on it: a schedule
  // writes nothing that another transfer of the phase reads (transport.h). Else null.
  T* DirectSource(const Transfer& transfer) const {
    if (transfer.sources.size() != 1 || transfer.divide || Owner(transfer.sources[0].replica) != rank_) return nullptr;
    for (const Place& d : transfer.destinations)
      if (Owner(d.replica) == rank_) return nullptr;
    return Source(transfer.sources[0]);
  }
  // Posts a send or receive of message `what` (an index into messages_).
  Status Post(bool send, void* data, std::int64_t count, int peer, int tag, std::int64_t what) {
    const std::int64_t bytes = count * static_cast<std::int64_t>(sizeof(T));
    if (bytes > INT_MAX)
      return Status::Runtime(collective_ + ": a message of " + std::to_string(bytes) +
                             " bytes exceeds MPI's int count; use more replicas or workers");
    MPI_Request request;
    const int code = send ? MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &request)
                          : MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, send ? "MPI_Isend" : "MPI_Irecv"));
    requests_.Add(request, peer, what);
    return Status::Ok();
  }
  // A message's id for Post: its description is only made if it fails.
  std::int64_t Note(const Place& place, std::int32_t sender, std::int32_t receiver, std::int64_t count) {
    messages_.push_back({place, sender, receiver, count});
    return static_cast<std::int64_t>(messages_.size()) - 1;
  }

  Status RunPhase(int tag) {
    if (log_ != nullptr) RecordMessages();
    const Clock::time_point deadline = Deadline(timeout_seconds_);
    requests_.Clear();
    messages_.clear();
    requests_.set_describe([this](std::int64_t m) {
      const NotedMessage& n = messages_[static_cast<std::size_t>(m)];
      return Message(n.place, n.sender, n.receiver, n.count);
    });
    auto describe = [this](int rank) { return DescribeRank(rank); };
    // 1. Receives: remote addends of the transfers this rank combines (into staging
    //    buffers), and results of remote combiners stored into this rank's replicas.
    std::size_t staged = 0;
    std::vector<std::vector<const T*>> addends(transfers_.size());
    // A large transfer moves in segments, so that the combiner sums segment g while
    // g + 1 is in flight. Both ends enumerate messages in the same order
    // (transfer, segment, source or destination), which MPI's ordering of messages
    // with one tag between two ranks then matches.
    const std::int64_t segment = std::max<std::int64_t>(kSegmentBytes / static_cast<std::int64_t>(sizeof(T)), 1);
    auto segments = [segment](std::int64_t count) {
      return std::max<std::int64_t>((count + segment - 1) / segment, 1);
    };
    auto length = [segment](std::int64_t count, std::int64_t g) { return std::min(segment, count - g * segment); };
    std::vector<std::vector<std::size_t>> first_request(transfers_.size());  // per segment, then its end
    for (std::size_t t = 0; t < transfers_.size(); ++t) {
      const Transfer& transfer = transfers_[t];
      if (Owner(transfer.combiner) != rank_) continue;
      std::vector<T*> staged_at(transfer.sources.size(), nullptr);
      T* const direct = DirectDestination(transfer);
      if (direct != nullptr) {
        // One addend, from another rank: it is the sum, received where it is kept.
        addends[t].push_back(direct);
        staged_at[0] = direct;
      }
      for (std::size_t k = 0; k < transfer.sources.size() && direct == nullptr; ++k) {
        const Place& s = transfer.sources[k];
        if (Owner(s.replica) == rank_) {
          addends[t].push_back(Source(s));
          continue;
        }
        if (staging_.size() <= staged) staging_.emplace_back();
        HugePageVector<T>& buffer = staging_[staged++];
        if (buffer.size() < static_cast<std::size_t>(transfer.count))
          buffer.resize(static_cast<std::size_t>(transfer.count));
        addends[t].push_back(buffer.data());
        staged_at[k] = buffer.data();
      }
      for (std::int64_t g = 0; g < segments(transfer.count); ++g) {
        first_request[t].push_back(requests_.size());
        for (std::size_t k = 0; k < transfer.sources.size(); ++k) {
          if (staged_at[k] == nullptr) continue;
          const Place& s = transfer.sources[k];
          DTLAB_RETURN_IF_ERROR(Post(false, staged_at[k] + g * segment, length(transfer.count, g), Owner(s.replica),
                                     tag, Note(s, s.replica, transfer.combiner, transfer.count)));
        }
      }
      first_request[t].push_back(requests_.size());
    }
    for (const Transfer& transfer : transfers_) {
      if (Owner(transfer.combiner) == rank_) continue;
      for (std::int64_t g = 0; g < segments(transfer.count); ++g)
        for (const Place& d : transfer.destinations)
          if (Owner(d.replica) == rank_)
            DTLAB_RETURN_IF_ERROR(Post(false, Data(d.replica, d.offset) + g * segment, length(transfer.count, g),
                                       Owner(transfer.combiner), tag + 1,
                                       Note(d, transfer.combiner, d.replica, transfer.count)));
    }
    // 2. Sends of this rank's addends to remote combiners.
    for (const Transfer& transfer : transfers_) {
      if (Owner(transfer.combiner) == rank_) continue;
      for (std::int64_t g = 0; g < segments(transfer.count); ++g)
        for (const Place& s : transfer.sources)
          if (Owner(s.replica) == rank_)
            DTLAB_RETURN_IF_ERROR(Post(true, Source(s) + g * segment, length(transfer.count, g),
                                       Owner(transfer.combiner), tag,
                                       Note(s, s.replica, transfer.combiner, transfer.count)));
    }
    // 3. Each transfer this rank combines, segment by segment once its addends are
    //    in: the sum, stored locally and sent to the remote destinations.
    std::size_t results = 0;
    for (std::size_t t = 0; t < transfers_.size(); ++t) {
      const Transfer& transfer = transfers_[t];
      if (Owner(transfer.combiner) != rank_) continue;
      std::vector<T*> to;
      for (const Place& d : transfer.destinations)
        if (Owner(d.replica) == rank_) to.push_back(Data(d.replica, d.offset));
      const bool remote = to.size() < transfer.destinations.size();
      T* const direct = remote && to.empty() ? DirectSource(transfer) : nullptr;
      if (direct != nullptr) {  // the lone addend is the sum: sent from where it is
        to.push_back(direct);
      } else if (remote && to.empty()) {  // nowhere local to keep the sum: stage it
        if (results_.size() <= results) results_.emplace_back();
        HugePageVector<T>& buffer = results_[results++];
        if (buffer.size() < static_cast<std::size_t>(transfer.count))
          buffer.resize(static_cast<std::size_t>(transfer.count));
        to.push_back(buffer.data());
      }
      for (std::int64_t g = 0; g < segments(transfer.count); ++g) {
        const auto k = static_cast<std::size_t>(g);
        DTLAB_RETURN_IF_ERROR(
            requests_.Wait(first_request[t][k], first_request[t][k + 1], deadline, describe, timeout_seconds_));
        const std::int64_t begin = g * segment, end = begin + length(transfer.count, g);
        // A lone addend received where the sum is kept (DirectDestination) is the sum.
        if (addends[t].size() != 1 || addends[t][0] != to[0]) Combine(addends[t], to, begin, end, transfer.divide);
        for (const Place& d : transfer.destinations)
          if (Owner(d.replica) != rank_)
            DTLAB_RETURN_IF_ERROR(Post(true, to[0] + begin, end - begin, Owner(d.replica), tag + 1,
                                       Note(d, transfer.combiner, d.replica, transfer.count)));
      }
    }
    // 4. Everything else: results arriving here, sends leaving.
    return requests_.Wait(0, requests_.size(), deadline, describe, timeout_seconds_);
  }

  // Elements [first, last) of the transfer.
  void Combine(const std::vector<const T*>& sources, const std::vector<T*>& destinations, std::int64_t first,
               std::int64_t last, bool divide) const {
    const std::int64_t count = last - first;
    constexpr std::int64_t kBlock = std::max<std::int64_t>(64 * 1024 / static_cast<std::int64_t>(sizeof(T)), 1);
    const T divisor = MeanDivisor<T>(replicas_);
    auto block = [&](std::int64_t begin, std::int64_t end) {
      CombineRange<T>(
          sources.size(), [&](std::size_t s) { return sources[s]; }, destinations.size(),
          [&](std::size_t d) { return destinations[d]; }, begin, end, divide, divisor);
    };
    if (count <= kBlock) {
      block(first, last);
      return;
    }
    tbb::parallel_for(std::int64_t{0}, (count + kBlock - 1) / kBlock,
                      [&](std::int64_t b) { block(first + b * kBlock, std::min(last, first + (b + 1) * kBlock)); });
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
  std::span<const std::span<const T>> inputs_;
  std::int32_t replicas_, per_rank_, rank_;
  std::int64_t* phases_;
  double timeout_seconds_;
  MessageLog* log_;
  std::int64_t step_;
  std::string collective_;
  bool dropping_ = false;
  std::vector<Transfer> transfers_;
  Requests requests_;
  std::vector<NotedMessage> messages_;
  std::vector<HugePageVector<T>>& staging_;  // the group's, kept between calls (no page faults per call)
  std::vector<HugePageVector<T>>& results_;
  Status status_;
};

}  // namespace

// Results are sent from their buffers: another rank's single copy pins them a page at
// a time (large ones: 2 MiB pages).
struct MpiWorkerGroup::Staging {
  std::vector<HugePageVector<float>> floats, float_results;
  std::vector<HugePageVector<std::int64_t>> words, word_results;
  std::vector<HugePageVector<Int448>> groups, group_results;
};

MpiWorkerGroup::MpiWorkerGroup() : staging_(std::make_unique<Staging>()) {}

StatusOr<std::unique_ptr<MpiWorkerGroup>> MpiWorkerGroup::Create(int* argc, char*** argv, double timeout_seconds) {
  // MPI_Init waits for every rank of the job to start, with no deadline of its own:
  // a watchdog ends this process (exit 3) if it has not returned within the timeout.
  std::mutex mutex;
  std::condition_variable initialized;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (initialized.wait_for(lock, std::chrono::duration<double>(timeout_seconds), [&] { return done; })) return;
    std::fprintf(stderr,
                 "dtlab: MPI_Init did not complete within %g s: a rank of this job did not start or cannot be reached "
                 "(check the hostfile, the network between the machines, and that dtlab runs on each); "
                 "raise --collective-timeout if start-up is only slow\n",
                 timeout_seconds);
    std::fflush(stderr);
    std::_Exit(3);
  });
  int provided = 0;
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  initialized.notify_one();
  watchdog.join();
  if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Init_thread"));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiWorkerGroup> group(new MpiWorkerGroup());
  MPI_Comm_rank(MPI_COMM_WORLD, &group->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &group->size_);
  group->timeout_seconds_ = timeout_seconds;
  world_rank = group->rank_;
  world_size = group->size_;
  return group;
}

MpiWorkerGroup::~MpiWorkerGroup() {
  if (finish_) MPI_Finalize();
}

Status MpiWorkerGroup::AllGather(std::span<const std::byte> mine, std::span<std::byte> all,
                                 std::span<const std::size_t> bytes_per_rank, std::string_view what,
                                 std::int64_t step) {
  std::vector<std::size_t> offsets(static_cast<std::size_t>(size_) + 1, 0);
  for (int r = 0; r < size_; ++r)
    offsets[static_cast<std::size_t>(r) + 1] =
        offsets[static_cast<std::size_t>(r)] + bytes_per_rank[static_cast<std::size_t>(r)];
  std::memcpy(all.data() + offsets[static_cast<std::size_t>(rank_)], mine.data(), mine.size());
  // Tags above the all-reduce's (which are below 16384).
  const int tag = 16384 + static_cast<int>(phases_++ % 8192);
  Requests requests;
  const std::string label = std::string(what) + (step > 0 ? " at step " + std::to_string(step) : "");
  requests.set_describe([&label](std::int64_t m) {
    return label + (m == 0 ? ": its part never arrived" : ": it did not take this rank's part");
  });
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request request;
    int code = MPI_Irecv(all.data() + offsets[static_cast<std::size_t>(r)],
                         static_cast<int>(bytes_per_rank[static_cast<std::size_t>(r)]), MPI_BYTE, r, tag,
                         MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Irecv"));
    requests.Add(request, r, 0);
    code = MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, r, tag, MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Isend"));
    requests.Add(request, r, 1);
  }
  const auto deadline = Deadline(timeout_seconds_);
  return requests.Wait(
      0, requests.size(), deadline, [](int r) { return "rank " + std::to_string(r); }, timeout_seconds_);
}

// Point-to-point messages use one tag above the collectives' (which are below 24576).
constexpr int kPointToPointTag = 30000;

Status MpiWorkerGroup::Send(std::int32_t to, std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX))
    return Status::Runtime(std::string(what) + ": message too large for MPI");
  MPI_Request request;
  const int code =
      MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, to, kPointToPointTag, MPI_COMM_WORLD, &request);
  if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Isend"));
  Requests requests;
  const std::string label(what);
  requests.set_describe([&label](std::int64_t) { return label + ": it did not take the message"; });
  requests.Add(request, to, 0);
  const auto deadline = Deadline(timeout_seconds_);
  return requests.Wait(
      0, 1, deadline, [](int r) { return "rank " + std::to_string(r); }, timeout_seconds_);
}

StatusOr<WorkerGroup::Received> MpiWorkerGroup::Receive(std::int32_t from, std::string_view what) {
  const auto deadline = Deadline(timeout_seconds_);
  const int source = from == kAnySender ? MPI_ANY_SOURCE : from;
  for (long spins = 0;; ++spins) {
    int found = 0;
    MPI_Status status;
    const int code = MPI_Iprobe(source, kPointToPointTag, MPI_COMM_WORLD, &found, &status);
    if (code != MPI_SUCCESS) return Status::Runtime(MpiError(code, "MPI_Iprobe"));
    if (found) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      Received received;
      received.from = status.MPI_SOURCE;
      received.bytes.resize(static_cast<std::size_t>(count));
      const int recv = MPI_Recv(received.bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, kPointToPointTag,
                                MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (recv != MPI_SUCCESS) return Status::Runtime(MpiError(recv, "MPI_Recv"));
      return received;
    }
    if (Clock::now() > deadline)
      return Status::Runtime("timed out after " + Seconds(timeout_seconds_) + " s waiting for " +
                             (from == kAnySender ? std::string("any rank") : "rank " + std::to_string(from)) + " (" +
                             std::string(what) + "); " +
                             (from == kAnySender ? std::string("no rank sent anything")
                                                 : ProbeOthers(from, std::min(1.0, timeout_seconds_))) +
                             "; raise --collective-timeout if it is only slow");
    if (spins > 64) {
      AnswerProbes();
      sched_yield();
    }
  }
}

template <typename T>
Status MpiWorkerGroup::RunSchedule(std::span<const std::span<T>> local, std::int32_t replicas, const std::string& name,
                                   const CollectiveOptions& options, const std::function<void(Transport<T>&)>& emit,
                                   std::span<const std::span<const T>> inputs) {
  const std::int64_t count = local.empty() ? 0 : static_cast<std::int64_t>(local[0].size());
  if (options.log != nullptr)
    options.log->Begin(name, options.step, replicas, count * static_cast<std::int64_t>(sizeof(T)));
  auto& staging = [&]() -> auto& {
    if constexpr (std::is_same_v<T, float>)
      return staging_->floats;
    else if constexpr (std::is_same_v<T, Int448>)
      return staging_->groups;
    else
      return staging_->words;
  }
  ();
  auto& results = [&]() -> auto& {
    if constexpr (std::is_same_v<T, float>)
      return staging_->float_results;
    else if constexpr (std::is_same_v<T, Int448>)
      return staging_->group_results;
    else
      return staging_->word_results;
  }
  ();
  MpiTransport<T> transport(local, replicas, rank_, &phases_, timeout_seconds_, options.log, options.step, name,
                            staging, results, inputs);
  emit(transport);
  if (options.log != nullptr) options.log->End();
  return transport.status();
}

template <typename T>
Status MpiWorkerGroup::RunAllReduce(std::span<const std::span<T>> local, std::int32_t replicas, ReduceOp op,
                                    const CollectiveOptions& options) {
  const std::int64_t count = local.empty() ? 0 : static_cast<std::int64_t>(local[0].size());
  return RunSchedule<T>(local, replicas, "all_reduce/" + std::string(AllReduceAlgorithmName(options.algorithm)),
                        options, [&](Transport<T>& transport) {
                          ScheduleAllReduce<T>(transport, options.algorithm, count, op, options.replicas_per_worker);
                        });
}

Status MpiWorkerGroup::ReduceScatterSlices(std::span<const std::span<std::int64_t>> local, std::int32_t replicas,
                                           std::span<const ElementRange> slices, OwnSlice own,
                                           const CollectiveOptions& options,
                                           std::span<const std::span<const std::int64_t>> inputs) {
  const std::int64_t count = local.empty() ? 0 : static_cast<std::int64_t>(local[0].size());
  return RunSchedule<std::int64_t>(
      local, replicas, "reduce_scatter", options,
      [&](Transport<std::int64_t>& transport) {
        ScheduleReduceScatterSlices(transport, static_cast<std::int32_t>(local.size()), count, slices, own);
      },
      inputs);
}

Status MpiWorkerGroup::AllGatherSlices(std::span<const std::span<float>> local, std::int32_t replicas,
                                       std::span<const ElementRange> slices, const CollectiveOptions& options) {
  return RunSchedule<float>(local, replicas, "all_gather", options, [&](Transport<float>& transport) {
    ScheduleAllGatherSlices(transport, static_cast<std::int32_t>(local.size()), slices);
  });
}

Status MpiWorkerGroup::AllGatherSlices(std::span<const std::span<std::int64_t>> local, std::int32_t replicas,
                                       std::span<const ElementRange> slices, const CollectiveOptions& options) {
  return RunSchedule<std::int64_t>(local, replicas, "all_gather", options, [&](Transport<std::int64_t>& transport) {
    ScheduleAllGatherSlices(transport, static_cast<std::int32_t>(local.size()), slices);
  });
}

Status MpiWorkerGroup::AllReduce(std::span<const std::span<float>> local, std::int32_t replicas, ReduceOp op,
                                 const CollectiveOptions& options) {
  return RunAllReduce<float>(local, replicas, op, options);
}

Status MpiWorkerGroup::AllReduce(std::span<const std::span<std::int64_t>> local, std::int32_t replicas, ReduceOp op,
                                 const CollectiveOptions& options) {
  return RunAllReduce<std::int64_t>(local, replicas, op, options);
}

Status MpiWorkerGroup::AllReduce(std::span<const std::span<Int448>> local, std::int32_t replicas, ReduceOp op,
                                 const CollectiveOptions& options) {
  return RunAllReduce<Int448>(local, replicas, op, options);
}

}  // namespace dtlab
