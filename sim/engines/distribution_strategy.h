// DistributionStrategy: the tf.distribute API shape over dtlab's virtual replicas.
//
//   DistributionStrategy strategy(StrategyKind::kMirrored, /*replicas=*/2);
//   PerReplica<float> losses = strategy.Run([&](const ReplicaContext& ctx, const Batch& b) {
//     return ComputeAverageLoss<float>(b.losses, {}, /*global_batch_size=*/4);
//   }, distributed_batch);
//   float total = strategy.Reduce(ReduceOp::kSum, losses);      // a real all-reduce
//   std::vector<float> local = strategy.ExperimentalLocalResults(losses);
//
// Run calls the step function once per replica (as oneTBB tasks; replicas are not
// threads) with a ReplicaContext telling the replica its id and the replica count.
//
// A step function that must talk to the other replicas mid-step (the replica
// context's all_reduce) is a C++20 coroutine returning ReplicaStep<T>:
//
//   strategy.RunWithCollectives([](ReplicaContext& ctx, const Batch& b) -> ReplicaStep<float> {
//     const float local = Sum(b.losses);
//     const float total = co_await ctx.AllReduce(ReduceOp::kSum, local);  // every replica waits here
//     co_return local / total;
//   }, batches);
//
// Each replica runs until it suspends at an all-reduce; when every replica has
// suspended at its k-th all-reduce, the strategy carries it out as one collective
// (a bulk-synchronous phase) and resumes them all with the result. No thread ever
// blocks waiting for a peer, which is how the same step runs on 1024 replicas on
// 2 cores. A replica that finishes (or asks for another size) while others wait in
// an all-reduce is reported as an error, where TensorFlow would hang.
// Reduce moves the per-replica values through the collectives of sim/comm/collectives.h
// with the strategy's all-reduce algorithm, so it sums in the same order a gradient
// all-reduce would. The training loop itself lives in sim/engines/cluster.h.
//
// Thread safety: Run's step function is called concurrently for distinct replicas.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tbb/parallel_for.h>

#include "core/status.h"
#include "sim/comm/collectives.h"
#include "sim/engines/strategy.h"

namespace dtlab {

/// One value per replica, as tf.distribute's PerReplica.
template <typename T>
struct PerReplica {
  std::vector<T> values;
};

/// What a step function knows about where it runs (tf.distribute.ReplicaContext).
struct ReplicaContext {
  std::int32_t replica_id_in_sync_group = 0;
  std::int32_t num_replicas_in_sync = 1;

  /// `co_await ctx.AllReduce(op, values)` inside a ReplicaStep coroutine: suspends
  /// this replica until every replica has reached its all-reduce, then resumes it
  /// with the reduction of all replicas' values.
  struct AllReduceAwaiter {
    ReplicaContext* context;
    ReduceOp op;
    std::vector<float> values;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<>) {
      context->pending_op = op;
      context->pending = std::move(values);
    }
    std::vector<float> await_resume() { return std::move(context->result); }
  };
  AllReduceAwaiter AllReduce(ReduceOp op, std::vector<float> values) { return {this, op, std::move(values)}; }

  /// The same for one float.
  struct ScalarAllReduceAwaiter {
    AllReduceAwaiter inner;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { inner.await_suspend(h); }
    float await_resume() { return inner.await_resume().at(0); }
  };
  ScalarAllReduceAwaiter AllReduce(ReduceOp op, float value) { return {{this, op, {value}}}; }

  // Between a suspension and the collective (used by RunWithCollectives).
  std::optional<std::vector<float>> pending;
  ReduceOp pending_op = ReduceOp::kSum;
  std::vector<float> result;
};

/// The coroutine type of a step function that uses ReplicaContext::AllReduce.
template <typename T>
class ReplicaStep {
 public:
  struct promise_type {
    std::optional<T> value;
    std::exception_ptr error;
    ReplicaStep get_return_object() { return ReplicaStep(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_value(T v) { value = std::move(v); }
    void unhandled_exception() { error = std::current_exception(); }
  };
  explicit ReplicaStep(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  ReplicaStep(ReplicaStep&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  ReplicaStep(const ReplicaStep&) = delete;
  ReplicaStep& operator=(const ReplicaStep&) = delete;
  ReplicaStep& operator=(ReplicaStep&&) = delete;
  ~ReplicaStep() {
    if (handle_) handle_.destroy();
  }
  std::coroutine_handle<promise_type> handle() const { return handle_; }

 private:
  std::coroutine_handle<promise_type> handle_;
};

class DistributionStrategy {
 public:
  /// REQUIRES: replicas >= 1 (one_device: exactly 1). Use ClusterConfig::Validate
  /// to check user input first.
  DistributionStrategy(StrategyKind kind, std::int32_t replicas,
                       AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing)
      : kind_(kind), replicas_(replicas), algorithm_(algorithm) {}

  StrategyKind kind() const { return kind_; }
  std::int32_t num_replicas_in_sync() const { return replicas_; }

  /// strategy.run(fn, args=(per_replica_args,)): fn(context, args.values[r]) per replica.
  template <typename Fn, typename Arg>
  auto Run(Fn&& fn, const PerReplica<Arg>& args) const
      -> PerReplica<std::invoke_result_t<Fn&, const ReplicaContext&, const Arg&>> {
    PerReplica<std::invoke_result_t<Fn&, const ReplicaContext&, const Arg&>> out;
    out.values.resize(static_cast<std::size_t>(replicas_));
    tbb::parallel_for(0, replicas_, [&](std::int32_t r) {
      ReplicaContext context;
      context.replica_id_in_sync_group = r;
      context.num_replicas_in_sync = replicas_;
      out.values[static_cast<std::size_t>(r)] = fn(context, args.values[static_cast<std::size_t>(r)]);
    });
    return out;
  }

  /// strategy.run(fn, args) for a coroutine step function that calls
  /// `co_await context.AllReduce(...)`. Returns the per-replica results, or
  /// InvalidArgument if the replicas' all-reduces do not line up (one replica
  /// finished while others wait, or their sizes or ops differ).
  template <typename Fn, typename Arg, typename Step = std::invoke_result_t<Fn&, ReplicaContext&, const Arg&>>
  auto RunWithCollectives(Fn&& fn, const PerReplica<Arg>& args) const
      -> StatusOr<PerReplica<typename decltype(std::declval<Step&>().handle().promise().value)::value_type>> {
    using T = typename decltype(std::declval<Step&>().handle().promise().value)::value_type;
    const auto n = static_cast<std::size_t>(replicas_);
    std::vector<ReplicaContext> contexts(n);
    std::vector<Step> steps;
    steps.reserve(n);
    for (std::size_t r = 0; r < n; ++r) {
      contexts[r].replica_id_in_sync_group = static_cast<std::int32_t>(r);
      contexts[r].num_replicas_in_sync = replicas_;
      steps.push_back(fn(contexts[r], args.values[r]));
    }
    for (std::int64_t round = 0;; ++round) {
      // Every replica runs until its next all-reduce (or its end), as oneTBB tasks.
      tbb::parallel_for(std::size_t{0}, n, [&](std::size_t r) {
        if (!steps[r].handle().done()) steps[r].handle().resume();
      });
      std::size_t finished = 0;
      for (std::size_t r = 0; r < n; ++r) {
        if (steps[r].handle().promise().error) std::rethrow_exception(steps[r].handle().promise().error);
        finished += steps[r].handle().done() ? 1 : 0;
      }
      if (finished == n) break;
      const std::string where = "all-reduce #" + std::to_string(round + 1);
      if (finished > 0)
        return Status::InvalidArgument(std::to_string(finished) + " replica(s) finished their step while " +
                                       std::to_string(n - finished) + " wait in " + where +
                                       ": every replica must make the same collective calls");
      std::vector<std::span<float>> buffers;
      for (std::size_t r = 0; r < n; ++r) {
        auto& c = contexts[r];
        if (c.pending->size() != contexts[0].pending->size() || c.pending_op != contexts[0].pending_op)
          return Status::InvalidArgument("replica " + std::to_string(r) + " asks " + where + " for " +
                                         std::to_string(c.pending->size()) + " values, replica 0 for " +
                                         std::to_string(contexts[0].pending->size()) +
                                         " (or another reduce op): every replica must make the same collective calls");
        buffers.emplace_back(*c.pending);
      }
      CollectiveOptions options;
      options.algorithm = algorithm_;
      AllReduce<float>(buffers, contexts[0].pending_op, options);
      for (auto& c : contexts) {
        c.result = std::move(*c.pending);
        c.pending.reset();
      }
    }
    PerReplica<T> out;
    for (auto& step : steps) out.values.push_back(std::move(*step.handle().promise().value));
    return out;
  }

  /// strategy.reduce(SUM | MEAN, value, axis=None) of a float per replica: an
  /// all-reduce of the values across replicas; returns the result replica 0 holds.
  float Reduce(ReduceOp op, const PerReplica<float>& value) const {
    std::vector<std::vector<float>> buffers;
    for (const float v : value.values) buffers.push_back({v});
    std::vector<std::span<float>> spans(buffers.begin(), buffers.end());
    CollectiveOptions options;
    options.algorithm = algorithm_;
    AllReduce<float>(spans, op, options);
    return buffers.empty() ? 0.0f : buffers[0][0];
  }

  /// strategy.experimental_local_results(value): the per-replica values in replica order.
  template <typename T>
  std::vector<T> ExperimentalLocalResults(const PerReplica<T>& value) const {
    return value.values;
  }

 private:
  StrategyKind kind_;
  std::int32_t replicas_;
  AllReduceAlgorithm algorithm_;
};

}  // namespace dtlab
