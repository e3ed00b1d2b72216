#!/usr/bin/env python3
"""Keras 3's LossScaleOptimizer, as JSON (tests/peers/tf_loss_scale.json).

  tf_loss_scale.py > tf_loss_scale.json

Runs real TensorFlow 2.21 / Keras 3 (the peers venv: scripts/peers-venv.sh) and prints:

- trajectories: SGD and Adam inside keras.optimizers.LossScaleOptimizer(initial_scale=8,
  dynamic_growth_steps=3), fed a scripted sequence of (scaled) gradients with infinities and NaNs, one
  device; after every step the weights as float32 bits, the loss scale, its step counter and the inner
  optimizer's iterations;
- replicas: the same optimizer under MirroredStrategy on 2 logical CPUs in a custom training loop
  (apply_gradients inside strategy.run), an overflow in one replica's local gradients: which replica's
  gradients decide whether the step is skipped, and what the weights become.

tests/unit/loss_scale_test.cc holds dtlab's DynamicLossScale to the trajectories bit for bit without
TensorFlow; tests/cli/tf_rules_check.sh runs this again and compares with the committed file.
"""
import json
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

INF = float("inf")
NAN = float("nan")
W0 = [1.0, -2.0, 0.5]
# Scaled gradients, one list per step: finite runs long enough to grow the scale, infinities and NaNs.
GRADIENTS = [
    [8.0, -4.0, 2.0], [16.0, 8.0, -8.0], [INF, 1.0, 1.0], [4.0, 4.0, 4.0], [2.0, -2.0, 1.0], [1.0, 1.0, 1.0],
    [0.5, 0.25, -0.5], [NAN, 0.0, 0.0], [1.0, -INF, 1.0], [3.0, 3.0, -3.0], [6.0, 2.0, 4.0], [-8.0, 8.0, 0.5],
]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def encode(values):
    return [v if v == v and abs(v) != INF else str(v) for v in values]  # JSON has no inf or nan


def main():
    import numpy as np
    import tensorflow as tf
    import keras

    tf.get_logger().setLevel("ERROR")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    out = {"tensorflow": tf.__version__, "keras": keras.__version__, "initial_scale": 8.0, "growth_steps": 3,
           "initial": W0, "gradients": [encode(g) for g in GRADIENTS]}

    trajectories = []
    for name, inner in [("sgd", lambda: keras.optimizers.SGD(learning_rate=0.5)),
                        ("adam", lambda: keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-7))]:
        variable = keras.Variable(np.array(W0, np.float32))
        optimizer = keras.optimizers.LossScaleOptimizer(inner(), initial_scale=8.0, dynamic_growth_steps=3)
        steps = []
        for g in GRADIENTS:
            optimizer.apply_gradients([(tf.constant(np.array(g, np.float32)), variable)])
            steps.append({"weights_bits": [bits(v) for v in variable.numpy()],
                          "scale": float(optimizer.dynamic_scale.numpy()),
                          "counter": int(optimizer.step_counter.numpy()),
                          "iterations": int(optimizer.iterations.numpy())})
        trajectories.append({"optimizer": name, "steps": steps})
    out["trajectories"] = trajectories

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    replicas = []
    for bad in [0, 1]:
        with strategy.scope():
            variable = keras.Variable(np.array([1.0, 2.0], np.float32))
            optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
            optimizer.build([variable])

        @tf.function
        def step():
            def replica_fn():
                replica = tf.distribute.get_replica_context().replica_id_in_sync_group
                g = tf.where(tf.equal(replica, bad), tf.constant([INF, 1.0]), tf.constant([1.0, 1.0]))
                optimizer.apply_gradients([(g, variable)])
            strategy.run(replica_fn)

        step()
        replicas.append({"overflow_on_replica": bad,
                         "weights_per_replica": [encode(v.numpy().tolist())
                                                 for v in strategy.experimental_local_results(variable.value)],
                         "scale": float(optimizer.dynamic_scale.numpy())})
    out["replicas"] = replicas
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
