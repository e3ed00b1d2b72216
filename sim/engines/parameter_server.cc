#include "sim/engines/parameter_server.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/batch.h"
#include "core/loss.h"
#include "core/rng.h"

namespace dtlab {

ParameterServerCluster::ParameterServerCluster(const Sequential<float>& model, const ParameterServerOptions& options,
                                               std::int64_t chunk_size)
    : model_(model), options_(options), runner_(model, chunk_size) {}

StatusOr<std::unique_ptr<ParameterServerCluster>> ParameterServerCluster::Create(
    const Sequential<float>& model, const ParameterServerOptions& options, std::string_view optimizer,
    const OptimizerOptions& optimizer_options, const ParameterList<float>& initial, std::int64_t chunk_size,
    WorkerGroup* group) {
  if (options.workers < 1) return Status::InvalidArgument("--workers must be at least 1 for parameter_server");
  if (group != nullptr && group->size() != 1 + options.workers + options.parameter_servers)
    return Status::InvalidArgument(
        "parameter_server across MPI ranks needs 1 chief + " + std::to_string(options.workers) + " workers + " +
        std::to_string(options.parameter_servers) +
        " parameter servers = " + std::to_string(1 + options.workers + options.parameter_servers) + " ranks, not " +
        std::to_string(group->size()));
  if (options.parameter_servers < 1)
    return Status::InvalidArgument("--parameter-servers must be at least 1, got " +
                                   std::to_string(options.parameter_servers));
  if (!(options.straggler_spread >= 0)) return Status::InvalidArgument("--straggler-spread must be >= 0");
  DTLAB_RETURN_IF_ERROR(options.loss.Validate());
  std::unique_ptr<ParameterServerCluster> cluster(new ParameterServerCluster(model, options, chunk_size));
  cluster->variables_ = initial;
  cluster->server_variables_.resize(static_cast<std::size_t>(options.parameter_servers));
  for (std::size_t i = 0; i < initial.size(); ++i)
    cluster->server_variables_[i % static_cast<std::size_t>(options.parameter_servers)].push_back(i);
  for (const auto& owned : cluster->server_variables_) {
    DTLAB_ASSIGN_OR_RETURN(auto server_optimizer, MakeOptimizer(optimizer, optimizer_options));
    ParameterList<float> shard;
    for (const std::size_t i : owned) shard.push_back(initial[i]);
    server_optimizer->Build(shard);
    cluster->server_optimizers_.push_back(std::move(server_optimizer));
  }
  cluster->worker_accuracy_.resize(static_cast<std::size_t>(options.workers));
  cluster->group_ = group;
  return cluster;
}

double ParameterServerCluster::StepSeconds(std::int32_t worker, std::int64_t examples, std::int64_t epoch,
                                           std::int64_t batch) const {
  CounterRng rng(options_.seed, RngPurpose::kStraggler,
                 (static_cast<std::uint64_t>(worker) << 44) | (static_cast<std::uint64_t>(epoch) << 24) |
                     static_cast<std::uint64_t>(batch));
  const double compute = options_.flops_per_example * static_cast<double>(examples) / options_.device_flops_per_second;
  // Pull and push: each parameter server sends (receives) its shard in parallel.
  double largest_shard = 0;
  for (const auto& owned : server_variables_) {
    double bytes = 0;
    for (const std::size_t i : owned) bytes += static_cast<double>(variables_[i].size()) * sizeof(float);
    largest_shard = std::max(largest_shard, bytes);
  }
  const double transfer = options_.link.latency_seconds + largest_shard / options_.link.bandwidth_bytes_per_second;
  return 2 * transfer + compute * (1.0 + options_.straggler_spread * rng.UniformDouble());
}

Status ParameterServerCluster::RunEpoch(const ImageDataset& data,
                                        const std::vector<std::vector<std::vector<std::int64_t>>>& per_worker_batches,
                                        std::int64_t epoch, float learning_rate, std::int64_t max_updates,
                                        const std::function<Status(const ParameterServerUpdate&)>& on_update,
                                        std::span<const std::int64_t> first_batches) {
  struct WorkerState {
    ParameterList<float> pulled;
    std::int64_t pulled_version = 0;
    std::size_t next = 0;  // next batch
    double start = 0, finish = 0;
    bool busy = false;
  };
  const auto workers = static_cast<std::size_t>(options_.workers);
  if (per_worker_batches.size() != workers)
    return Status::InvalidArgument("parameter_server: " + std::to_string(per_worker_batches.size()) +
                                   " worker input streams for " + std::to_string(workers) + " workers");
  auto first = [&](std::size_t w) {
    const std::int64_t batches = static_cast<std::int64_t>(per_worker_batches[w].size());
    return static_cast<std::size_t>(first_batches.empty() ? 0 : std::clamp<std::int64_t>(first_batches[w], 0, batches));
  };
  if (!first_batches.empty() && first_batches.size() != workers)
    return Status::InvalidArgument("parameter_server: " + std::to_string(first_batches.size()) +
                                   " worker positions for " + std::to_string(workers) + " workers");
  if (group_ != nullptr) {
    const std::int32_t rank = group_->rank();
    if (rank == 0) return RunChief(max_updates, on_update);
    if (rank <= options_.workers) {
      const auto worker = static_cast<std::size_t>(rank - 1);
      const auto& mine = per_worker_batches[worker];
      return RunWorker(data, {mine.begin() + static_cast<std::ptrdiff_t>(first(worker)), mine.end()}, learning_rate);
    }
    return RunServer(rank - 1 - options_.workers);
  }
  std::vector<WorkerState> state(workers);
  const std::int32_t servers = options_.parameter_servers;
  const std::int64_t variable_bytes = model_.num_parameter_values() * static_cast<std::int64_t>(sizeof(float));

  auto start = [&](std::size_t w, double now) {
    WorkerState& s = state[w];
    s.pulled = variables_;
    s.pulled_version = version_;
    s.start = now;
    const auto examples = static_cast<std::int64_t>(per_worker_batches[w][s.next].size());
    s.finish = now + StepSeconds(static_cast<std::int32_t>(w), examples, epoch, static_cast<std::int64_t>(s.next));
    s.busy = true;
  };
  const double epoch_start = clock_;
  for (std::size_t w = 0; w < workers; ++w) {
    state[w].next = first(w);
    if (state[w].next < per_worker_batches[w].size()) start(w, epoch_start);
  }

  ParameterList<float> grads = model_.ZeroParameters();
  for (;;) {
    // The next push: the earliest finish, ties to the lower worker id.
    std::size_t w = workers;
    for (std::size_t i = 0; i < workers; ++i)
      if (state[i].busy && (w == workers || state[i].finish < state[w].finish)) w = i;
    if (w == workers) return Status::Ok();
    WorkerState& s = state[w];
    clock_ = s.finish;

    // The worker's gradient on its batch with the variables it pulled. Dropout's
    // masks: the update this gradient becomes, the worker's own streams.
    runner_.set_dropout_step({options_.seed, version_ + 1, DropoutRng::kPerReplica, static_cast<std::int32_t>(w), {}});
    const float loss = WorkerGradient(data, per_worker_batches[w][s.next], s.pulled, grads);
    const auto b = static_cast<std::int64_t>(labels_.size());
    worker_accuracy_[w].UpdateState(labels_, predictions_);

    // Push: each parameter server applies the gradients of its variables.
    log_.Begin("ps/push", version_ + 1, static_cast<std::int32_t>(workers) + servers, variable_bytes);
    for (std::int32_t p = 0; p < servers; ++p) {
      const auto& owned = server_variables_[static_cast<std::size_t>(p)];
      ParameterList<float> shard, shard_grads;
      std::int64_t bytes = 0;
      for (const std::size_t i : owned) {
        shard.push_back(std::move(variables_[i]));
        shard_grads.push_back(grads[i]);
        bytes += grads[i].size() * static_cast<std::int64_t>(sizeof(float));
      }
      server_optimizers_[static_cast<std::size_t>(p)]->Apply(shard, shard_grads, learning_rate);
      for (std::size_t k = 0; k < owned.size(); ++k) variables_[owned[k]] = std::move(shard[k]);
      log_.Record({0, static_cast<std::int32_t>(w), static_cast<std::int32_t>(workers) + p, bytes});
    }
    log_.End();

    ParameterServerUpdate update;
    update.update = ++version_;
    update.worker = static_cast<std::int32_t>(w);
    update.pulled_version = s.pulled_version;
    update.staleness = version_ - 1 - s.pulled_version;
    update.start_seconds = s.start;
    update.finish_seconds = clock_;
    update.loss = loss;
    update.examples = b;
    updates_.push_back(update);
    DTLAB_RETURN_IF_ERROR(on_update(update));
    s.busy = false;
    if (max_updates >= 0 && version_ >= max_updates) return Status::Ok();
    if (++s.next < per_worker_batches[w].size()) start(w, clock_);
  }
}

float ParameterServerCluster::WorkerGradient(const ImageDataset& data, const std::vector<std::int64_t>& batch,
                                             const ParameterList<float>& params, ParameterList<float>& grads) {
  GatherBatch(data, batch, images_, labels_);
  const auto b = static_cast<std::int64_t>(labels_.size());
  losses_.assign(labels_.size(), 0.0f);
  predictions_.assign(labels_.size(), 0);
  coefficients_.assign(labels_.size(), 0.0f);
  // One replica in sync (N = 1) on the whole batch: the denominator is the
  // configured batch (global), the batch itself (default: b x 1; per-replica; DDP's
  // mean; Keras 3's sum_over_batch_size, whose 1/N is 1), and the worker's share of
  // the regularization is all of it whatever the split or scaling (r / 1). A worker
  // never steps on an empty batch, so the empty-replica rule never applies.
  const LossCode& loss = options_.loss;
  const LossCode::LossScale scale =
      loss.ReplicaCoefficients(b, options_.batch_size > 0 ? options_.batch_size : b, 1, coefficients_);
  const RegularizationSplit split = loss.split(options_.math);
  if (options_.math == MathMode::kExact)  // the whole regularization, as the share is with N = 1
    return runner_.ExactGradient(params, images_, labels_, coefficients_, losses_, predictions_, words_, grads);
  const BatchSegment segment{&params, 0, b, &grads, nullptr};
  runner_.Run(images_, labels_, coefficients_, losses_, predictions_, std::span(&segment, 1));
  model_.AddRegularizationGradient(params, loss.RegularizationShare(1.0f, 0, 1, split), grads);
  return loss.ReplicaDataLoss(losses_, scale) +
         loss.RegularizationShare(model_.RegularizationLoss(params), 0, 1, split);
}

// The protocol across ranks: each message is a kind, then its fields in order.
namespace {

enum class PsMessage : std::int32_t {
  kPull = 1,     // worker -> server: {}
  kVariables,    // server -> worker: {version, values of the shard}
  kPush,         // worker -> server: {pulled version, learning rate, gradient of the shard}
  kApplied,      // server -> worker: {version before this update}
  kReport,       // worker -> chief: {loss, examples, staleness, labels, predictions}
  kGoOn,         // chief -> worker: {1 go on, 0 stop}
  kEpochDone,    // worker -> chief: {}
  kEndEpoch,     // chief -> server: {}
  kShard,        // server -> chief: {version, values, optimizer slots, iterations}
  kEpochClosed,  // chief -> worker and server: {updates so far}
};

class Writer {
 public:
  explicit Writer(PsMessage kind) { Put(static_cast<std::int32_t>(kind)); }
  template <typename T>
  Writer& Put(const T& value) {
    return Append(&value, sizeof(T));
  }
  template <typename T>
  Writer& PutAll(std::span<const T> values) {
    return Append(values.data(), values.size_bytes());
  }
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  // resize + memcpy rather than vector::insert, which GCC 12 at -O1/-O2 flags
  // with a false -Wstringop-overflow on the first insert into an empty vector.
  Writer& Append(const void* data, std::size_t size) {
    const std::size_t at = bytes_.size();
    bytes_.resize(at + size);
    if (size > 0) std::memcpy(bytes_.data() + at, data, size);
    return *this;
  }
  std::vector<std::byte> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<std::byte>& bytes) : bytes_(bytes) {}
  template <typename T>
  T Get() {
    T value{};
    if (at_ + sizeof(T) <= bytes_.size())
      std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    else
      short_ = true;
    at_ += sizeof(T);
    return value;
  }
  template <typename T>
  void GetAll(std::span<T> out) {
    if (at_ + out.size_bytes() <= bytes_.size())
      std::memcpy(out.data(), bytes_.data() + at_, out.size_bytes());
    else
      short_ = true;
    at_ += out.size_bytes();
  }
  PsMessage Kind() { return static_cast<PsMessage>(Get<std::int32_t>()); }
  bool ok() const { return !short_; }

 private:
  const std::vector<std::byte>& bytes_;
  std::size_t at_ = 0;
  bool short_ = false;
};

Status Unexpected(const char* who, PsMessage got, std::int32_t from) {
  return Status::Runtime(std::string("parameter_server protocol: ") + who + " got message kind " +
                         std::to_string(static_cast<int>(got)) + " from rank " + std::to_string(from) +
                         "; this is a bug in dtlab, please report it");
}

Status Short(const char* what, std::int32_t from) {
  return Status::Runtime(std::string("parameter_server protocol: a short ") + what + " from rank " +
                         std::to_string(from) + "; this is a bug in dtlab, please report it");
}

std::span<const float> Values(const Tensor<float>& t) { return {t.data(), static_cast<std::size_t>(t.size())}; }

}  // namespace

Status ParameterServerCluster::RunChief(std::int64_t max_updates,
                                        const std::function<Status(const ParameterServerUpdate&)>& on_update) {
  std::int32_t done = 0;
  bool stopped = max_updates >= 0 && version_ >= max_updates;
  while (done < options_.workers) {
    DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received message,
                           group_->Receive(WorkerGroup::kAnySender, "the chief waiting for the workers' reports"));
    Reader in(message.bytes);
    const PsMessage kind = in.Kind();
    const std::int32_t worker = message.from - 1;
    if (kind == PsMessage::kEpochDone) {
      ++done;
      continue;
    }
    if (kind != PsMessage::kReport || worker < 0 || worker >= options_.workers)
      return Unexpected("the chief", kind, message.from);
    ParameterServerUpdate update;
    update.worker = worker;
    update.loss = in.Get<float>();
    update.examples = in.Get<std::int64_t>();
    update.staleness = in.Get<std::int64_t>();
    if (!in.ok() || update.examples < 0 || update.examples > (std::int64_t{1} << 30))
      return Short("report", message.from);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(update.examples)), predictions(labels.size());
    in.GetAll(std::span(labels));
    in.GetAll(std::span(predictions));
    if (!in.ok()) return Short("report", message.from);
    worker_accuracy_[static_cast<std::size_t>(worker)].UpdateState(labels, predictions);
    update.update = ++version_;
    update.pulled_version = update.update - 1 - update.staleness;
    updates_.push_back(update);
    DTLAB_RETURN_IF_ERROR(on_update(update));
    if (max_updates >= 0 && version_ >= max_updates) stopped = true;
    DTLAB_RETURN_IF_ERROR(
        group_->Send(message.from, Writer(PsMessage::kGoOn).Put<std::int32_t>(stopped ? 0 : 1).bytes(), "go on"));
  }
  // Every worker is done: the servers hand over their shards (for evaluation and
  // checkpoints), then everyone may start the next epoch.
  for (std::int32_t p = 0; p < options_.parameter_servers; ++p) {
    DTLAB_RETURN_IF_ERROR(group_->Send(ServerRank(p), Writer(PsMessage::kEndEpoch).bytes(), "end of epoch"));
    DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received message,
                           group_->Receive(ServerRank(p), "the chief waiting for a parameter server's shard"));
    Reader in(message.bytes);
    if (const PsMessage kind = in.Kind(); kind != PsMessage::kShard) return Unexpected("the chief", kind, message.from);
    in.Get<std::int64_t>();  // the server's version
    const auto& owned = server_variables_[static_cast<std::size_t>(p)];
    Optimizer& optimizer = *server_optimizers_[static_cast<std::size_t>(p)];
    for (const std::size_t i : owned) in.GetAll(variables_[i].span());
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t k = 0; k < owned.size(); ++k) in.GetAll(optimizer.slot(s, k).span());
    optimizer.set_iterations(in.Get<std::int64_t>());
    if (!in.ok()) return Short("shard", message.from);
  }
  for (std::int32_t r = 1; r < group_->size(); ++r)
    DTLAB_RETURN_IF_ERROR(
        group_->Send(r, Writer(PsMessage::kEpochClosed).Put<std::int64_t>(version_).bytes(), "the end of the epoch"));
  return Status::Ok();
}

Status ParameterServerCluster::RunWorker(const ImageDataset& data,
                                         const std::vector<std::vector<std::int64_t>>& batches, float learning_rate) {
  const std::int32_t servers = options_.parameter_servers;
  std::vector<std::int64_t> pulled_versions(static_cast<std::size_t>(servers));
  ParameterList<float> grads = model_.ZeroParameters();
  for (const auto& batch : batches) {
    // Pull every shard.
    for (std::int32_t p = 0; p < servers; ++p)
      DTLAB_RETURN_IF_ERROR(group_->Send(ServerRank(p), Writer(PsMessage::kPull).bytes(), "pull"));
    for (std::int32_t p = 0; p < servers; ++p) {
      DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received message,
                             group_->Receive(ServerRank(p), "a worker pulling the variables"));
      Reader in(message.bytes);
      if (const PsMessage kind = in.Kind(); kind != PsMessage::kVariables)
        return Unexpected("a worker", kind, message.from);
      pulled_versions[static_cast<std::size_t>(p)] = in.Get<std::int64_t>();
      for (const std::size_t i : server_variables_[static_cast<std::size_t>(p)]) in.GetAll(variables_[i].span());
      if (!in.ok()) return Short("variables message", message.from);
    }
    // Dropout's masks: the version pulled, this worker's own streams.
    runner_.set_dropout_step({options_.seed,
                              pulled_versions.empty() ? 0 : pulled_versions[0] + 1,
                              DropoutRng::kPerReplica,
                              group_->rank(),
                              {}});
    const float loss = WorkerGradient(data, batch, variables_, grads);
    // Push each shard's gradient; its server applies it on arrival.
    for (std::int32_t p = 0; p < servers; ++p) {
      Writer out(PsMessage::kPush);
      out.Put<std::int64_t>(pulled_versions[static_cast<std::size_t>(p)]).Put<float>(learning_rate);
      for (const std::size_t i : server_variables_[static_cast<std::size_t>(p)]) out.PutAll(Values(grads[i]));
      DTLAB_RETURN_IF_ERROR(group_->Send(ServerRank(p), out.bytes(), "push"));
    }
    std::int64_t staleness = 0;  // updates applied between this pull and this push (the largest over servers)
    for (std::int32_t p = 0; p < servers; ++p) {
      DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received message,
                             group_->Receive(ServerRank(p), "a worker waiting for its update to be applied"));
      Reader in(message.bytes);
      if (const PsMessage kind = in.Kind(); kind != PsMessage::kApplied)
        return Unexpected("a worker", kind, message.from);
      staleness = std::max(staleness, in.Get<std::int64_t>() - pulled_versions[static_cast<std::size_t>(p)]);
    }
    Writer report(PsMessage::kReport);
    report.Put<float>(loss).Put<std::int64_t>(static_cast<std::int64_t>(labels_.size())).Put<std::int64_t>(staleness);
    report.PutAll(std::span<const std::int32_t>(labels_)).PutAll(std::span<const std::int32_t>(predictions_));
    DTLAB_RETURN_IF_ERROR(group_->Send(0, report.bytes(), "report"));
    DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received go_on, group_->Receive(0, "a worker waiting for the chief"));
    Reader in(go_on.bytes);
    if (const PsMessage kind = in.Kind(); kind != PsMessage::kGoOn) return Unexpected("a worker", kind, go_on.from);
    if (in.Get<std::int32_t>() == 0) break;  // the chief has counted enough updates (--steps)
  }
  DTLAB_RETURN_IF_ERROR(group_->Send(0, Writer(PsMessage::kEpochDone).bytes(), "epoch done"));
  DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received closed, group_->Receive(0, "a worker waiting for the end of the epoch"));
  Reader in(closed.bytes);
  if (const PsMessage kind = in.Kind(); kind != PsMessage::kEpochClosed)
    return Unexpected("a worker", kind, closed.from);
  version_ = in.Get<std::int64_t>();
  return Status::Ok();
}

Status ParameterServerCluster::RunServer(std::int32_t server) {
  const auto& owned = server_variables_[static_cast<std::size_t>(server)];
  Optimizer& optimizer = *server_optimizers_[static_cast<std::size_t>(server)];
  ParameterList<float> shard, shard_grads;
  for (const std::size_t i : owned) {
    shard.push_back(variables_[i]);
    shard_grads.push_back(variables_[i]);
  }
  std::int64_t version = optimizer.iterations();  // updates this server has applied
  for (;;) {
    DTLAB_ASSIGN_OR_RETURN(WorkerGroup::Received message,
                           group_->Receive(WorkerGroup::kAnySender, "a parameter server waiting for requests"));
    Reader in(message.bytes);
    const PsMessage kind = in.Kind();
    if (kind == PsMessage::kPull) {
      Writer out(PsMessage::kVariables);
      out.Put<std::int64_t>(version);
      for (const auto& v : shard) out.PutAll(Values(v));
      DTLAB_RETURN_IF_ERROR(group_->Send(message.from, out.bytes(), "the variables"));
    } else if (kind == PsMessage::kPush) {
      in.Get<std::int64_t>();  // the version the worker pulled
      const float learning_rate = in.Get<float>();
      for (auto& g : shard_grads) in.GetAll(g.span());
      if (!in.ok()) return Short("push", message.from);
      optimizer.Apply(shard, shard_grads, learning_rate);
      DTLAB_RETURN_IF_ERROR(
          group_->Send(message.from, Writer(PsMessage::kApplied).Put<std::int64_t>(version).bytes(), "applied"));
      ++version;
    } else if (kind == PsMessage::kEndEpoch) {
      Writer out(PsMessage::kShard);
      out.Put<std::int64_t>(version);
      for (const auto& v : shard) out.PutAll(Values(v));
      for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
        for (std::size_t k = 0; k < owned.size(); ++k) out.PutAll(Values(optimizer.slot(s, k)));
      out.Put<std::int64_t>(optimizer.iterations());
      DTLAB_RETURN_IF_ERROR(group_->Send(0, out.bytes(), "the shard"));
      for (std::size_t k = 0; k < owned.size(); ++k) variables_[owned[k]] = shard[k];
    } else if (kind == PsMessage::kEpochClosed) {
      version_ = in.Get<std::int64_t>();
      return Status::Ok();
    } else {
      return Unexpected("a parameter server", kind, message.from);
    }
  }
}

SparseCategoricalAccuracy ParameterServerCluster::MergedAccuracy() const {
  SparseCategoricalAccuracy merged;
  for (const auto& a : worker_accuracy_) merged.Merge(a);
  return merged;
}

void ParameterServerCluster::ResetMetrics() {
  for (auto& a : worker_accuracy_) a.ResetState();
}

void ParameterServerCluster::ExportState(TrainingState& state) const {
  state.params = variables_;
  for (std::size_t p = 0; p < server_variables_.size(); ++p) {
    const Optimizer& optimizer = *server_optimizers_[p];
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t k = 0; k < server_variables_[p].size(); ++k)
        state.optimizer->slot(s, server_variables_[p][k]) = optimizer.slot(s, k);
  }
  state.optimizer->set_iterations(version_);
  state.train_accuracy = MergedAccuracy();
}

void ParameterServerCluster::ImportState(const TrainingState& state) {
  variables_ = state.params;
  for (std::size_t p = 0; p < server_variables_.size(); ++p) {
    Optimizer& optimizer = *server_optimizers_[p];
    for (std::size_t s = 0; s < optimizer.SlotNames().size(); ++s)
      for (std::size_t k = 0; k < server_variables_[p].size(); ++k)
        optimizer.slot(s, k) = state.optimizer->slot(s, server_variables_[p][k]);
    optimizer.set_iterations(state.optimizer->iterations());
  }
  version_ = state.optimizer->iterations();
  ResetMetrics();
  worker_accuracy_[0] = state.train_accuracy;
}

}  // namespace dtlab
