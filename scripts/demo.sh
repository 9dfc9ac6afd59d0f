#!/usr/bin/env bash
# The whole job, offline: build `shapes`, train cifarnet on 2 CPU clones, evaluate,
# export, reload the export and predict. Usage: scripts/demo.sh [OUTPUT_DIR]
# OUTPUT_DIR is the demo's own: a re-run keeps the converted data, resumes training
# from its checkpoint (a finished run has no steps left), evaluates again and replaces
# the export.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${1:-demo_output}
STEPS=${DEMO_STEPS:-800}
MIN_ACCURACY=${DEMO_MIN_ACCURACY:-0.9}

step() { printf '\n=== %s\n' "$*"; }

step "1/5 Building the shapes dataset in $OUT/shapes"
"$PYTHON" download_and_convert_data.py --dataset_name=shapes --dataset_dir="$OUT/shapes"

step "2/5 Training cifarnet to step $STEPS on 2 CPU clones (resumes from $OUT/train's checkpoint, if any)"
"$PYTHON" train_image_classifier.py --dataset_name=shapes --dataset_dir="$OUT/shapes" \
    --model_name=cifarnet --train_dir="$OUT/train" --num_clones=2 --clone_on_cpu \
    --batch_size=64 --max_number_of_steps="$STEPS" --optimizer=adam --opt_epsilon=1e-8 \
    --learning_rate=0.001 --learning_rate_decay_type=fixed --weight_decay=0.0004 \
    --log_every_n_steps=50 --save_summaries_secs=30 --save_interval_secs=120

step "3/5 Evaluating on the 1,000 validation images"
"$PYTHON" eval_image_classifier.py --dataset_name=shapes --dataset_dir="$OUT/shapes" \
    --dataset_split_name=validation --model_name=cifarnet \
    --checkpoint_path="$OUT/train" --eval_dir="$OUT/eval"

step "4/5 Exporting a SavedModel and a frozen GraphDef (replacing a previous run's)"
"$PYTHON" export_inference_graph.py --model_name=cifarnet --dataset_name=shapes \
    --checkpoint_path="$OUT/train" --saved_model_dir="$OUT/export" \
    --output_file="$OUT/cifarnet_frozen.pb" --overwrite

step "5/5 Reloading the export and predicting validation images"
"$PYTHON" predict_image_classifier.py --saved_model_dir="$OUT/export" \
    --dataset_name=shapes --dataset_dir="$OUT/shapes" --dataset_split_name=validation \
    --preprocessing_name=cifarnet --num_examples=10

accuracy=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['Accuracy'])" "$OUT/eval/metrics.json")
if "$PYTHON" -c "import sys; sys.exit(float(sys.argv[1]) < float(sys.argv[2]))" "$accuracy" "$MIN_ACCURACY"; then
    printf '\nDemo finished: validation accuracy %s (>= %s). TensorBoard logs: %s/train, %s/eval\n' \
        "$accuracy" "$MIN_ACCURACY" "$OUT" "$OUT"
else
    printf '\nDemo FAILED: validation accuracy %s is below %s.\n' "$accuracy" "$MIN_ACCURACY" >&2
    exit 1
fi
