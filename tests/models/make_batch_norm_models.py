#!/usr/bin/env python3
"""Writes tests/models/batch_norm_cnn.json and batch_norm_cnn_unsynchronized.json with Keras itself
(model.to_json()): Conv2D, BatchNormalization (synchronized or not), MaxPooling2D, Dropout, Dense,
BatchNormalization over features, ReLU, Dense. Usage: make_batch_norm_models.py tests/models
(with the peers environment's Python, which has Keras 3)."""
import os, json, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import keras
out = sys.argv[1]
for sync in (True, False):
    L = keras.layers
    m = keras.Sequential([
        keras.Input((28, 28, 1)),
        L.Conv2D(8, 3, activation="relu", name="conv2d"),
        L.BatchNormalization(synchronized=sync, name="batch_normalization"),
        L.MaxPooling2D(name="max_pooling2d"),
        L.Dropout(0.25, name="dropout"),
        L.Flatten(name="flatten"),
        L.Dense(32, name="dense"),
        L.BatchNormalization(synchronized=sync, name="batch_normalization_1"),
        L.ReLU(name="re_lu"),
        L.Dense(10, name="dense_1"),
    ], name="batch_norm_cnn")
    path = f"{out}/batch_norm_cnn{'' if sync else '_unsynchronized'}.json"
    open(path, "w").write(json.dumps(json.loads(m.to_json()), indent=1) + "\n")
print(keras.__version__)
