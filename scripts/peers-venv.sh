#!/usr/bin/env bash
# Creates (idempotently) the Python virtual environment holding TensorBoard, the peer
# that reads dtlab's event files back with TensorBoard's own reader
# (tests/cli/tensorboard_reader.sh), and TensorFlow, the peer that runs a dumped step
# under tf.distribute (tests/cli/tf_peer_check.sh). Never needed to build or run dtlab;
# those tests skip without it. Needs Debian's python3-venv and PyPI.
#   scripts/peers-venv.sh    the venv goes to ${DTLAB_PEERS_VENV:-/opt/dtlab-peers}
# Prints the venv's python at the end.
set -euo pipefail

venv="${DTLAB_PEERS_VENV:-/opt/dtlab-peers}"
py="$venv/bin/python"

# TensorBoard is not packaged by Debian, hence a venv rather than apt; Debian's own
# python3 marks its site-packages externally managed, so pip needs one anyway.
if ! "$py" -m pip --version >/dev/null 2>&1; then
  # --clear: a venv left half-made (say, before python3-venv was installed) lacks pip.
  /usr/bin/python3 -m venv --clear "$venv"
fi
if ! "$py" -c "import tensorboard" >/dev/null 2>&1; then
  "$py" -m pip install --quiet --disable-pip-version-check tensorboard
  "$py" -c "import tensorboard"  # fail here, not in a test, if the install is broken
fi
# TensorFlow itself (CPU only), for tests/cli/tf_peer_check.sh (tests/peers/tf_peer.py):
# pinned, since that test compares dtlab with this version's tf.distribute and Keras 3.
if ! "$py" -c "import tensorflow" >/dev/null 2>&1; then
  "$py" -m pip install --quiet --disable-pip-version-check tensorflow-cpu==2.21.0
  "$py" -c "import tensorflow"  # fail here, not in a test, if the install is broken
fi
echo "$py"
