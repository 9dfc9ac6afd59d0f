"""Flag groups of export_inference_graph.py: Exported model, Export formats, SavedModel
(prediction loads it), Parity check."""
from absl import flags

from cli.export_job import ExportConfig
from export import pipeline
from export.pipeline import ExportRequest

# The flags belong to the script calling cli.flags.define(): absl files them under it, so
# its --helpfull and its flags.txt (cli.run_record) list them.
flags.disclaim_key_flags()


def exported_model(define):
    # TF-Slim's --batch_size here; --batch_size means examples per clone elsewhere.
    define.integer('graph_batch_size', None, 'Batch size of the GraphDef\'s and the TFLite '
                   'model\'s input; default: any for graphs, 1 for TFLite. The SavedModel '
                   'takes any batch.')
    define.alias('batch_size', 'graph_batch_size', 'TF-Slim\'s name for '
                 '--graph_batch_size.')
    define.bool('is_video_model', ExportConfig.is_video_model, 'The network takes clips '
                '[batch, frames, height, width, channels] (i3d, s3dg).')
    define.integer('num_frames', None, 'Frames per clip of a video model; default: the '
                   'network\'s.')
    define.bool('is_training', ExportRequest.training_graph, 'Write the training-mode '
                'graph (dropout and batch norm on batch statistics); '
                '--export_format=graphdef only.')


def export_formats(define):
    define.list('export_format', None, 'One or several of: ' + ', '.join(pipeline.FORMATS)
                + '. Default: saved_model with --saved_model_dir or --export_dir; with '
                '--output_file graphdef, or frozen_graph given --checkpoint_path.')
    define.string('export_dir', None, 'Directory for the formats, under fixed names: '
                  'saved_model/, inference_graph.pb, frozen_graph.pb, model_float.tflite, '
                  'model_int8.tflite, slim_checkpoint/model.ckpt, plus labels.txt.')
    define.string('output_file', None, 'The one graph or TFLite file asked for; alone, '
                  'TF-Slim\'s inference GraphDef, frozen given --checkpoint_path.')
    define.bool('write_text_graphdef', ExportRequest.write_text_graphdef, 'Write GraphDefs '
                'as text (.pbtxt).')
    define.bool('include_preprocessing', ExportConfig.include_preprocessing, 'Accepted for '
                'older commands; every image SavedModel now preprocesses uint8, encoded '
                'and tf.Example inputs.')
    define.enum('tflite_io_dtype', ExportRequest.tflite_io_dtype, ['uint8', 'float32'],
                'Input and output type of the int8 TFLite model.')


def saved_model(define):
    define.string('saved_model_dir', None, 'The SavedModel\'s directory: export writes it '
                  'there (instead of <export_dir>/saved_model), prediction loads it (or '
                  'an --export_dir holding saved_model/).')


def parity_check(define):
    define.float('parity_tolerance', ExportRequest.float_tolerance, 'Largest logit '
                 'difference of float formats, relative to the largest logit.')
    define.float('min_int8_agreement', ExportRequest.min_int8_agreement, 'Smallest top-1 '
                 'agreement of the int8 model with the float model.')
    define.integer('num_parity_examples', ExportConfig.num_parity_examples, 'Images run '
                   'through each export and the model.')
    define.string('parity_split_name', ExportConfig.parity_split_name, 'Split of '
                  '--dataset_dir the parity images come from.')
    define.integer('num_calibration_examples', ExportConfig.num_calibration_examples,
                   'Images calibrating the int8 model\'s ranges.')
    define.string('calibration_split_name', ExportConfig.calibration_split_name, 'Split of '
                  '--dataset_dir the calibration images come from.')
