// The compact exact all-reduce: every replica gets the correctly rounded float sum of
// the replicas' exact accumulators (core/exact_sum.h), the same bits as all-reducing
// their kExactWords words and rounding once, while the wire carries about 7 bytes per
// value instead of kExactWords int64 words (docs/exact.md, "The compact all-reduce").
//
// Rounds, each a real SUM collective over the replicas' buffers:
//  1. Block scales: per block of kCompactBlock values, each replica sends one float,
//     2^(its largest value's bound - 320) (0 for an all-zero block, +inf for one with
//     a non-finite term or a value too large for a float scale). Every replica reads
//     the same sum, an upper bound on every replica's values in the block.
//  2. Windows: from the bound, each block gets a window lsb L chosen so that the sum
//     of N fields fits a signed 56-bit field; each replica sends w = floor(V / 2^L) *
//     2^b + (V mod 2^L != 0), b = bit_width(N), eight fields packed in an Int448
//     (sim/comm/int448.h), whose sums carry between limbs. The sum gives Q and K
//     (how many replicas had bits below L): the exact sum S lies in [Q 2^L + K,
//     (Q + K) 2^L - K], and K = 0 means S = Q 2^L. Where both ends round to the same
//     float, that is the result (round to nearest is monotone). Blocks with a
//     non-finite or huge value send their whole accumulators, in an int64 SUM
//     collective that runs only where there are some.
//  3. Refinement: the values left undecided send their next bits, [L', L), the same
//     way, until every value is decided (L = 0 leaves nothing below).
// Where the replicas span processes, round 2 is a reduce-scatter and an all-gather
// instead, each process deciding its own slice (ExactSumCollectives::Scattered).
// Which values are decided depends only on the sums every replica reads, so every
// replica takes the same path; the result never depends on the windows, which only
// decide how much is sent.
//
// Thread safety: one call at a time per set of buffers.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "core/huge_pages.h"
#include "core/status.h"
#include "sim/comm/all_reduce_algorithm.h"
#include "sim/comm/int448.h"

namespace dtlab {

/// How exact mode all-reduces its gradients (--exact-all-reduce): the kExactWords
/// words of every value (every algorithm moves them as they are), or compactly.
enum class ExactAllReduce { kWords, kCompact };
StatusOr<ExactAllReduce> ParseExactAllReduce(std::string_view name);
std::string_view ExactAllReduceName(ExactAllReduce kind);

/// Values per block scale: one float per 32 values adds 1/8 byte per value.
inline constexpr std::int64_t kCompactBlock = 32;
/// The values of a worker's slice come in multiples of this (ExactSumCollectives::Scattered).
inline constexpr std::int64_t kCompactScatterGrain = 4096;
/// Between workers, round 2 runs in pieces of this many values (the last may be
/// shorter), each reduce-scattered, decided and all-gathered before the next is
/// extracted: what one stage writes, the next reads from the cache, not from memory.
inline constexpr std::int64_t kCompactScatterPiece = std::int64_t{1} << 18;
/// Round 2's slices of `values` windowed values across `workers` workers, one per
/// worker in order: near-equal runs of kCompactScatterGrain values (an empty slice
/// past the last value starts at the value count).
std::vector<ElementRange> CompactScatterSlices(std::int64_t values, std::int32_t workers);

/// The SUM collectives the compact all-reduce runs on: in place over this process's
/// replicas' buffers (one span per local replica, all the same size), every buffer
/// ending with the sum over all replicas (of every process). Every replica must read
/// the same bits: true of every all-reduce schedule in sim/comm.
struct ExactSumCollectives {
  std::function<Status(std::span<const std::span<float>>)> sum_floats;
  std::function<Status(std::span<const std::span<std::int64_t>>)> sum_words;
  std::function<Status(std::span<const std::span<Int448>>)> sum_groups;
  /// Optional, where the replicas span processes (workers > 1): round 2's window sums
  /// as a reduce-scatter of the fields across the workers, each worker deciding only
  /// the values of its slice, then an all-gather of the decided floats. Every worker
  /// otherwise reads every sum and decides every value: this spares W - 1 of those W
  /// decisions and sends floats, not fields, in the all-reduce's second half. The
  /// fields travel one to an int64 word, not packed eight to an Int448: 8 bytes a
  /// value instead of 7, with no packing and unpacking around the collective (which
  /// took more time than the byte). Each piece of kCompactScatterPiece values is
  /// scattered on its own; worker w's slice of a piece is a multiple of
  /// kCompactScatterGrain values (the last ends at the piece's end). The results are
  /// the same bits either way.
  struct Scattered {
    std::int32_t workers = 1;  // the scattered path runs where workers > 1
    std::int32_t worker = 0;   // this process's worker (it holds one)
    /// Sums the fields of every replica of every worker: afterwards buffers[0] (this
    /// worker's first replica) holds the sum of slice `worker`'s fields. `slices` (one
    /// per worker, in order) partition the buffers. With OwnSlice::kLeftOut (where
    /// every worker holds one replica), slice `worker` of buffers[0] is not an addend:
    /// it ends with the other workers' sum (ScheduleReduceScatterSlices).
    std::function<Status(std::span<const std::span<std::int64_t>>, std::span<const ElementRange>, OwnSlice)>
        reduce_scatter;
    /// Slice w of worker w's buffers[0] to every worker's buffers[0]: the decided
    /// floats, then the undecided values' indices and sums.
    std::function<Status(std::span<const std::span<float>>, std::span<const ElementRange>)> all_gather;
    std::function<Status(std::span<const std::span<std::int64_t>>, std::span<const ElementRange>)> all_gather_words;
    /// Optional, where two workers hold one replica each: reduce_scatter with
    /// OwnSlice::kLeftOut, out of place. Slice v of this worker's `input` (its
    /// encoded high words, as they lie) lands in slice v of worker v's `output`, v
    /// not this worker; nothing else is written. With it, round 2 sends the high
    /// words and the receiver builds the fields: no pass extracts them.
    std::function<Status(std::span<const std::int64_t>, std::span<std::int64_t>, std::span<const ElementRange>)>
        high_words;
    /// Round 2's values per piece: a multiple of kCompactScatterGrain (tests take
    /// small ones); every worker must name the same.
    std::int64_t piece = kCompactScatterPiece;
  } scattered;
};

/// Scattered from a reduce-scatter and one generic all-gather callable:
/// all_gather(std::span<const std::span<T>>, std::span<const ElementRange>) -> Status.
template <typename ReduceScatter, typename AllGather>
ExactSumCollectives::Scattered ScatteredOf(std::int32_t workers, std::int32_t worker, ReduceScatter reduce_scatter,
                                           AllGather all_gather) {
  return {
      workers,
      worker,
      std::move(reduce_scatter),
      [all_gather](std::span<const std::span<float>> b, std::span<const ElementRange> s) { return all_gather(b, s); },
      [all_gather](std::span<const std::span<std::int64_t>> b, std::span<const ElementRange> s) {
        return all_gather(b, s);
      },
      {}};
}

/// The three from one generic callable: sum(std::span<const std::span<T>>) -> Status.
template <typename Sum>
ExactSumCollectives SumCollectivesOf(Sum sum) {
  return {[sum](std::span<const std::span<float>> b) { return sum(b); },
          [sum](std::span<const std::span<std::int64_t>> b) { return sum(b); },
          [sum](std::span<const std::span<Int448>> b) { return sum(b); },
          {}};
}

namespace compact_internal {
/// For s, a float sum (in any order) of `replicas` non-negative floats (the block
/// scales), finite: a `top` with their exact sum below 2^top, the bound a window is
/// sized from. ilogb(s) + 1 where the float sum's error bound allows it, else + 2.
int ScaleSumTop(float s, std::int32_t replicas);
/// Where two workers send their high words (Scattered::high_words): the fields of a
/// block of kCompactBlock values from its high words and its header (a BlockFields
/// header: low_set mask | the window lsb's height above the high word, at most 64,
/// << 32; not kSentAsFields).
std::vector<std::int64_t> HighWordFields(std::span<const std::int64_t> high, std::int64_t header, int count_bits);
/// Round 2's decision of such a block from both workers' high words and headers, as
/// the high-words path makes it (in registers, where the build has AVX2): the
/// same out and undecided as DecideWindowSums of the two HighWordFields' sums.
/// REQUIRES: count_bits >= 2.
void DecideHighWordBlocks(std::span<const std::int64_t> own, std::int64_t own_header,
                          std::span<const std::int64_t> other, std::int64_t other_header, int count_bits, int lsb,
                          std::span<float> out, std::span<char> undecided);
/// Round 2's decision for values whose window lsb is `lsb`, from their field sums
/// (Q 2^count_bits + K): out[k] = the correctly rounded sum where every sum in
/// the value's interval rounds alike, with undecided[k] = 0; else undecided[k] = 1.
/// REQUIRES: K = 0 where lsb = 0 (no bits lie below bit 0).
void DecideWindowSums(std::span<const std::int64_t> sums, int count_bits, int lsb, std::span<float> out,
                      std::span<char> undecided);
}  // namespace compact_internal

/// What the compact all-reduce sent, per replica.
struct CompactExactStats {
  std::int64_t values = 0;
  std::int64_t scale_floats = 0;     // round 1
  std::int64_t words = 0;            // int64 words (7 per Int448) all-reduced over every later round
  std::int64_t scattered_words = 0;  // round 2's int64 fields, where reduce-scattered (Scattered)
  std::int64_t gathered_floats = 0;  // round 2's floats, all-gathered (Scattered)
  std::int64_t gathered_words = 0;   // round 2's undecided counts, indices and sums, all-gathered
  std::int64_t full_values = 0;      // values sent as whole accumulators
  std::int64_t zero_values = 0;      // values in blocks that were zero on every replica (sent as zero words)
  std::vector<std::int64_t> sent;    // per window round: the values it carried
  /// Bytes on the wire per value, against 4 for a float all-reduce.
  double BytesPerValue() const;
  /// Where this call's time went on this process, in seconds of a steady clock (for
  /// benches: bench/mpi_exact_allreduce.cc prints them). A collective's time includes
  /// waiting for the slowest replica.
  struct Seconds {
    double scales = 0.0;      // round 1: the block scales and their sum
    double windows = 0.0;     // the window lsbs, from the scales
    double extraction = 0.0;  // every window round: the fields, packed (and whole values' words); or the headers
    double sum = 0.0;         // every window round: the groups' all-reduce or reduce-scatter (and whole values')
    double decision = 0.0;    // every window round: unpacking the sums, deciding, finding the undecided
    double gather = 0.0;      // scattered: the floats' and the undecided values' all-gathers
    double total = 0.0;       // the whole call
  } seconds;
};

/// One replica's exact gradient as the compact all-reduce reads it, in about 16 bytes
/// per value instead of kExactWords words (152 bytes). Per block of kCompactBlock
/// values: `bound`, with |V| < 2^bound units for each of its values (0: all zero;
/// kWholeBlock: a non-finite term, or a value past the block scales' range), and a
/// mask of its deep values. Per value: bits [base, base + 128) of V in two's
/// complement, base = Base(the block's bound), so they hold its sign and every bit
/// from base up. A value with bits below base (its block spans more than 126 bits
/// from its bound to the value's lowest set bit), and every value of a kWholeBlock
/// block, is deep: its bit in `deep` is set and it keeps its whole words in
/// `deep_words`. Whether a value has bits below a window's lsb is read from its
/// window (or its words), so no per-value lsb is kept; where the window lies in the
/// high word, a mask per block says which low words are not zero (`low_set`), so
/// that round 2 reads the high words alone.
struct CompactGradient {
  static constexpr std::int16_t kWholeBlock = -1;
  static_assert(kCompactBlock == 32, "a block's deep values are a 32-bit mask");
  std::int64_t values = 0;
  std::vector<std::int16_t> bound;            // per block
  std::vector<std::uint32_t> deep;            // per block: bit k set where value k of the block is deep
  std::vector<std::uint32_t> low_set;         // per block: bit k set where value k's window_low is not 0
  HugePageVector<std::uint64_t> window_low;   // per value: bits [base, base + 64); 0 where deep
  HugePageVector<std::uint64_t> window_high;  // per value: bits [base + 64, base + 128); 0 where deep
  std::vector<std::int64_t> deep_index;       // ascending
  std::vector<std::int64_t> deep_words;       // kExactWords per deep value

  /// The lsb of a block's windows: the block's bound less 126, or 0.
  static int Base(int block_bound) { return block_bound > 126 ? block_bound - 126 : 0; }
  bool IsDeep(std::int64_t i) const {
    return (deep[static_cast<std::size_t>(i / kCompactBlock)] >> (i % kCompactBlock) & 1) != 0;
  }
  /// Replaces the contents with the encoding of `words` (values * kExactWords words,
  /// normalized here in place: the same values). Keeps the vectors' capacity.
  void Encode(std::span<std::int64_t> words);
  /// words += the encoded values, value i into words [i * kExactWords, (i + 1) *
  /// kExactWords): the same values as adding the words it was encoded from (a deep
  /// value's words are merged, a window is added at its base). REQUIRES: values *
  /// kExactWords words, whose sums stay in the accumulators' range.
  void AddTo(std::span<std::int64_t> words) const;
  /// Bytes held (the vectors' sizes).
  std::int64_t bytes() const;
};

/// The buffers the compact all-reduce sends from and decides in, kept between calls
/// (a training step's) so that a call does not map and clear fresh pages: without it
/// that was half the time of a call (and a tenth between processes, for the flags).
struct CompactExactWorkspace {
  std::vector<std::vector<float>> scales;
  std::vector<HugePageVector<Int448>> groups;        // the window rounds' packed fields (read by MPI's single copy)
  std::vector<HugePageVector<std::int64_t>> fields;  // scattered, a piece of round 2's fields (or high words)
  std::vector<std::int64_t> headers;                 // scattered high words: the blocks' headers
  std::vector<std::int64_t> header_fields;           // the fields of the blocks sent as fields
  std::vector<std::int64_t> header_fields_sum;       // the same, as reduce-scattered
  std::vector<std::vector<std::int64_t>> words;      // round 2's whole values
  std::vector<CompactGradient> encoded;              // the replicas' words, encoded (the overload that takes words)
  std::vector<int> block_lsb;                        // round 2's window lsb per block
  std::vector<char> undecided;                       // per value of a round: 1 where undecided
  /// The fraction of round 2's values the last call left undecided (every worker
  /// reads the same). Scattered, an undecided value's index and sum cost 16 bytes,
  /// and round 2 saves 1.5 bytes a value: past kMaxScatteredUndecided (gradients
  /// leave far fewer) the next call all-reduces round 2 instead.
  double undecided_fraction = 0.0;
  static constexpr double kMaxScatteredUndecided = 0.125;
};

/// outputs[r][i] = the sum over all `replicas` replicas of value i of inputs[r],
/// correctly rounded to float. Same contract as below; `workspace` may be null.
StatusOr<CompactExactStats> CompactExactAllReduce(std::span<const CompactGradient* const> inputs,
                                                  std::span<const std::span<float>> outputs, std::int32_t replicas,
                                                  const ExactSumCollectives& collectives,
                                                  CompactExactWorkspace* workspace = nullptr);

/// outputs[r][i] = the sum over all `replicas` replicas of accumulator i (words
/// [i * kExactWords, (i + 1) * kExactWords) of inputs[r]), correctly rounded to
/// float. The inputs are normalized in place (same values). REQUIRES: one input
/// and one output per local replica, inputs of outputs.size() * kExactWords words,
/// 1 <= replicas < 2^20. Errors: what a collective returns; a Runtime error if the
/// local replicas read different sums (a collective that broke its contract).
StatusOr<CompactExactStats> CompactExactAllReduce(std::span<const std::span<std::int64_t>> inputs,
                                                  std::span<const std::span<float>> outputs, std::int32_t replicas,
                                                  const ExactSumCollectives& collectives,
                                                  CompactExactWorkspace* workspace = nullptr);

}  // namespace dtlab
