"""Every flag of the scripts, in topic groups: GROUPS maps a group's title to its definer.

One idiom: a group is a function of `define` (cli.flags.Define) in a topic module here,
calling define.<kind>(name, default, help) once per flag, in the order --help lists them.
A flag that fills a config dataclass field takes its default from that field
(`define.integer('num_clones', DeploymentConfig.num_clones, ...)`), so the dataclass is the
one place the default is written; a default written here is the flag's own: None for
"unset" (cli.configs resolves it per script) or a value no config field holds.
tests/cli/test_one_schema.py fails when a flag's default differs from its field's.
"""
from cli.flag_groups import (data, devices, evaluate, exporting, model, optimizers, recipes,
                             tools, train)

# Title -> definer; a script's --help shows its groups in the order it names them.
GROUPS = {
    'Model': model.model,
    'Dataset': data.dataset,
    'Split': data.split,
    'Input pipeline': data.input_pipeline,
    'Weights': model.weights,
    'Quantization': model.quantization,
    'Training': train.training,
    'Augmentation': recipes.augmentation,
    'Batch recipes': recipes.batch_recipes,
    'Stochastic depth': recipes.stochastic_depth,
    'Distillation': recipes.distillation,
    'Optimizer': train.optimizer,
    'Modern optimizers': optimizers.modern_optimizers,
    'Learning rate': train.learning_rate,
    'Fine-tuning': train.fine_tuning,
    'Checkpoints and progress': train.checkpoints_and_progress,
    'Devices': devices.devices,
    'Device performance': devices.device_performance,
    'Cluster': devices.cluster,
    'Evaluation': evaluate.evaluation,
    'Batch-norm statistics': model.batch_norm_statistics,
    'Continuous evaluation': evaluate.continuous_evaluation,
    'Image size': model.image_size,
    'Exported model': exporting.exported_model,
    'Export formats': exporting.export_formats,
    'SavedModel': exporting.saved_model,
    'Prediction': tools.prediction,
    'Existing output': tools.existing_output,
    'Checkpoint averaging': tools.checkpoint_averaging,
    'Keras weights': tools.keras_weights,
    'timm weights': tools.timm_weights,
    'Checkpoint output': tools.checkpoint_output,
    'Parity check': exporting.parity_check,
    'Conversion': data.conversion,
    'Logging': tools.tf_logging,
    'Benchmark': evaluate.benchmark,
    'tf.data service': data.data_service,
}
