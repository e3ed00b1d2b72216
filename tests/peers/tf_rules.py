#!/usr/bin/env python3
"""TensorFlow's answers to the rules dtlab follows, as JSON (tests/peers/tf_rules.json).

  tf_rules.py > tf_rules.json

Runs real TensorFlow 2.21 / Keras 3 (the peers venv: scripts/peers-venv.sh) on one process with 4 logical CPU
devices and prints, for dtlab's unit test tests/unit/tf_rules_test.cc to hold dtlab to:

- rebatch: how strategy.experimental_distribute_dataset(range(n).batch(G, drop_remainder)) under each
  AutoShardPolicy deals the elements to R replicas of one worker, step by step (the grid below);
- compute_average_loss: each replica's tf.nn.compute_average_loss inside strategy.run, with and without
  global_batch_size and sample_weight, on uneven per-replica batches with an empty one;
- optimizers: Keras 3's Adam, RMSprop and SGD (with and without momentum), five steps on crafted values,
  each weight as its float32 bit pattern after every step;
- mean_metric: the Mean-metric trap, keras.metrics.Mean over the replicas' scaled losses against SUM.

tests/cli/tf_rules_check.sh runs this and compares its output with the committed file, so the file is what
TensorFlow says, and the unit test, which needs no TensorFlow, holds dtlab to it on every machine.
"""
import json
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPLICAS = 4  # logical CPU devices; a strategy takes the first R
POLICIES = ["OFF", "AUTO", "DATA", "FILE", "HINT"]
# (elements, global batch, drop_remainder): even and short last batches, batches smaller than the
# replica count (empty replicas), and a dropped remainder.
DATASETS = [(8, 4, False), (10, 4, False), (13, 5, False), (7, 3, False), (10, 8, False), (9, 4, True)]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def main():
    import numpy as np
    import tensorflow as tf
    import keras

    tf.get_logger().setLevel("ERROR")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)

    def mirrored(r):
        return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(r)])

    out = {"tensorflow": tf.__version__, "keras": keras.__version__}

    # --- rebatch ---
    rebatch = []
    for replicas in range(1, REPLICAS + 1):
        strategy = mirrored(replicas)
        for n, global_batch, drop in DATASETS:
            for policy in POLICIES:
                options = tf.data.Options()
                options.experimental_distribute.auto_shard_policy = getattr(
                    tf.data.experimental.AutoShardPolicy, policy)
                dataset = tf.data.Dataset.range(n).batch(global_batch, drop_remainder=drop).with_options(options)
                steps = []
                for element in strategy.experimental_distribute_dataset(dataset):
                    steps.append([[int(v) for v in t.numpy()] for t in strategy.experimental_local_results(element)])
                rebatch.append({"elements": n, "global_batch": global_batch, "drop_remainder": drop,
                                "replicas": replicas, "policy": policy, "steps": steps})
    out["rebatch"] = rebatch

    # --- compute_average_loss ---
    # Dyadic values: every sum is exact, so only the rule (the denominator, an empty replica) decides the bits.
    cases = [
        {"losses": [[0.5, 1.25, 2.0], [3.5, 0.75], [1.0, 0.25, 4.0], []], "weights": None},
        {"losses": [[0.5, 1.25, 2.0], [3.5, 0.75], [1.0, 0.25, 4.0], []], "weights": [[1.0, 0.5, 2.0], [0.25, 1.0],
                                                                                     [0.0, 1.0, 0.5], []]},
        {"losses": [[2.0, 3.0], [4.0, 5.0], [1.5, 2.5], [6.0, 0.5]], "weights": None},
    ]
    average = []
    strategy = mirrored(REPLICAS)
    for case in cases:
        for global_batch in [None, 7, 8, 13]:
            losses, weights = case["losses"], case["weights"]

            def value_fn(ctx, table=losses):
                return tf.constant(table[ctx.replica_id_in_sync_group], tf.float32)

            def weight_fn(ctx, table=weights):
                return tf.constant(table[ctx.replica_id_in_sync_group], tf.float32)

            per_example = strategy.experimental_distribute_values_from_function(value_fn)
            sample_weight = strategy.experimental_distribute_values_from_function(weight_fn) if weights else None

            def replica_fn(x, w, g=global_batch):
                return tf.nn.compute_average_loss(x, sample_weight=w, global_batch_size=g)

            results = strategy.experimental_local_results(strategy.run(replica_fn, args=(per_example, sample_weight)))
            average.append({"losses": losses, "weights": weights, "global_batch_size": global_batch,
                            "replicas": REPLICAS, "bits": [bits(r.numpy()) for r in results]})
    out["compute_average_loss"] = average

    # --- optimizers ---
    w0 = [1.0, -2.0, 0.5, 3.0e-3, -7.25, 0.0, 1.0e-6, 12.5, -0.125, 2.0e4]
    grads = [
        [0.5, -0.25, 1.0e-3, 2.0, -3.0, 0.0, 1.0e-8, 0.75, 4.0, -1.0e-2],
        [0.25, 0.5, -1.0e-3, 2.5, 1.0, 0.125, -1.0e-8, 0.5, -4.0, 3.0e-2],
        [-0.5, 0.0, 2.0e-3, -2.0, 0.5, -0.125, 2.0e-8, 0.25, 2.0, -5.0e-2],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        [3.0e-5, -6.0, 0.1, 0.2, -0.3, 7.0, -1.0e-4, 0.0, 0.5, 1.0e3],
    ]
    optimizers = []
    for name, lr, momentum in [("adam", 1e-3, 0.0), ("rmsprop", 1e-3, 0.0), ("sgd", 0.01, 0.0), ("sgd", 0.01, 0.9)]:
        if name == "adam":
            optimizer = keras.optimizers.Adam(learning_rate=lr, epsilon=1e-7)
        elif name == "rmsprop":
            optimizer = keras.optimizers.RMSprop(learning_rate=lr)
        else:
            optimizer = keras.optimizers.SGD(learning_rate=lr, momentum=momentum)
        variable = keras.Variable(np.array(w0, np.float32))
        after = []
        for g in grads:
            optimizer.apply_gradients([(tf.constant(np.array(g, np.float32)), variable)])
            after.append([bits(v) for v in variable.numpy()])
        optimizers.append({"name": name, "learning_rate": lr, "momentum": momentum, "initial": w0, "gradients": grads,
                           "after_each_step_bits": after})
    out["optimizers"] = optimizers

    # --- the Mean-metric trap ---
    replica_losses = [[2.0, 3.0], [4.0, 5.0]]
    trap = mirrored(2)
    with trap.scope():
        metric = keras.metrics.Mean()
    values = trap.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(replica_losses[ctx.replica_id_in_sync_group], tf.float32))

    @tf.function
    def step(per_example_loss):
        def replica_fn(x):
            loss = tf.nn.compute_average_loss(x, global_batch_size=4)
            metric.update_state(loss)
            return loss
        losses = trap.run(replica_fn, args=(per_example_loss,))
        return trap.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    total = step(values)
    out["mean_metric"] = {"losses": replica_losses, "global_batch_size": 4, "mean_result_bits": bits(metric.result()),
                          "sum_bits": bits(total.numpy())}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
