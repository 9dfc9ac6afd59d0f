"""ImageNet from small archives in the ILSVRC2012 formats, through the real converter."""
import io
import tarfile

import numpy as np
import pytest
import tensorflow as tf
from helpers.testing_utils import encoded_image

from datasets import dataset_factory, dataset_utils, image_coding, imagenet, input_pipeline
from preprocessing import preprocessing_factory

SYNSETS = ("n01440764", "n01443537")
BOX_XML = """<annotation><filename>{stem}</filename>
<size><width>40</width><height>20</height><depth>3</depth></size>
<object><name>{synset}</name><bndbox><xmin>4</xmin><ymin>2</ymin><xmax>20</xmax>
<ymax>30</ymax></bndbox></object>
<object><name>n99999999</name><bndbox><xmin>0</xmin><ymin>0</ymin><xmax>1</xmax>
<ymax>1</ymax></bndbox></object></annotation>"""


def _tar(path, members, mode="w"):
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _cmyk_jpeg():
    pil = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    pil.new("CMYK", (12, 10), (10, 200, 30, 0)).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.fixture
def imagenet_source(tmp_path):
    source = tmp_path / "ilsvrc"
    source.mkdir()
    inner = {}
    for label, synset in enumerate(SYNSETS):
        members = {f"{synset}_{i}.JPEG": encoded_image(20, 40, seed=label * 10 + i)
                   for i in range(3)}
        if label == 1:  # a PNG named .JPEG, as TF-Slim found one
            members[f"{synset}_2.JPEG"] = encoded_image(20, 40, seed=99, image_format="png")
            members[f"{synset}_3.JPEG"] = _cmyk_jpeg()
        _tar(source / f"{synset}.tar", members)
        inner[f"{synset}.tar"] = (source / f"{synset}.tar").read_bytes()
        (source / f"{synset}.tar").unlink()
    _tar(source / "ILSVRC2012_img_train.tar", inner)
    _tar(source / "ILSVRC2012_img_val.tar",
         {f"ILSVRC2012_val_{i:08d}.JPEG": encoded_image(30, 30, seed=50 + i)
          for i in range(1, 5)})
    (source / "imagenet_2012_validation_synset_labels.txt").write_text(
        "n01443537\nn01440764\nn01440764\nn01443537\n")
    (source / "imagenet_metadata.txt").write_text(
        "n01440764\ttench, Tinca tinca\nn01443537\tgoldfish, Carassius auratus\n")
    _tar(tmp_path / "bbox.tar.gz", {
        f"{SYNSETS[0]}/{SYNSETS[0]}_1.xml":
            BOX_XML.format(stem=f"{SYNSETS[0]}_1", synset=SYNSETS[0]).encode()}, "w:gz")
    return source, tmp_path / "bbox.tar.gz"


def _records(directory, split):
    spec = dataset_factory.get_dataset("imagenet", split, str(directory))
    return [tf.train.Example.FromString(r.numpy())
            for r in tf.data.TFRecordDataset(spec.list_files())]


def test_converts_labels_names_boxes_and_reencodes(imagenet_source, tmp_path):
    source, boxes = imagenet_source
    out = tmp_path / "imagenet"
    dataset_factory.download_and_convert("imagenet", str(out), options=dataset_utils.ConvertOptions(
        source_dir=str(source), bounding_boxes=str(boxes), train_shards=2,
        validation_shards=2))

    assert sorted(p.name for p in out.glob("train-*")) == [
        "train-00000-of-00002", "train-00001-of-00002"]
    assert (out / "labels.txt").read_text().splitlines() == [
        "0:background", "1:tench, Tinca tinca", "2:goldfish, Carassius auratus"]
    train = {ex.features.feature["image/filename"].bytes_list.value[0].decode(): ex
             for ex in _records(out, "train")}
    assert len(train) == 7
    for name, example in train.items():
        feature = example.features.feature
        assert feature["image/class/label"].int64_list.value == [
            1 if name.startswith(SYNSETS[0]) else 2]
        assert feature["image/format"].bytes_list.value == [b"JPEG"]
        data = feature["image/encoded"].bytes_list.value[0]
        assert image_coding.sniff_format(data) == "jpeg"
        assert image_coding.jpeg_num_components(data) == 3  # CMYK and PNG re-encoded
    boxed = train[f"{SYNSETS[0]}_1.JPEG"].features.feature
    # Only the box of the image's own synset, normalised and clipped to [0, 1].
    assert boxed["image/object/bbox/xmin"].float_list.value == pytest.approx([0.1])
    assert boxed["image/object/bbox/ymax"].float_list.value == pytest.approx([1.0])
    assert boxed["image/object/bbox/label"].int64_list.value == [1]
    validation = _records(out, "validation")
    by_name = {ex.features.feature["image/filename"].bytes_list.value[0]:
               ex.features.feature["image/class/label"].int64_list.value[0]
               for ex in validation}
    assert by_name == {b"ILSVRC2012_val_00000001.JPEG": 2, b"ILSVRC2012_val_00000002.JPEG": 1,
                       b"ILSVRC2012_val_00000003.JPEG": 1, b"ILSVRC2012_val_00000004.JPEG": 2}

    # The inception training path reads the boxes and crops while decoding.
    spec = dataset_factory.get_dataset("imagenet", "train", str(out))
    input_fn = input_pipeline.make_input_fn(
        spec, preprocessing_factory.get_preprocessing("inception", is_training=True),
        input_pipeline.InputConfig(batch_size=7, image_size=16, is_training=True, seed=1,
                                   decode_in_preprocessing=True, use_bboxes=True))
    images, labels = next(iter(input_fn(None)))
    assert images.shape == (7, 16, 16, 3) and set(labels.numpy()) <= {1, 2}
    parsed = spec.parse(train[f"{SYNSETS[0]}_1.JPEG"].SerializeToString())
    np.testing.assert_allclose(parsed["bboxes"].numpy(), [[0.1, 0.1, 1.0, 0.5]], rtol=1e-6)


def test_the_shipped_class_names_are_the_1000_ilsvrc_synsets_in_label_order():
    with open(imagenet.CLASSES_FILE, encoding="utf-8") as f:
        lines = f.read().splitlines()
    synsets = [line.split("\t")[0] for line in lines]
    assert len(lines) == 1000 and all(line.count("\t") == 1 for line in lines)
    assert synsets == sorted(set(synsets))
    assert (synsets[0], synsets[-1]) == ("n01440764", "n15075141")
    names = imagenet.INFO.class_names
    assert len(names) == 1001  # TF-Slim's: 0 is background, then the sorted synsets
    assert names[:3] == ("background", "tench, Tinca tinca", "goldfish, Carassius auratus")
    assert names[1000] == "toilet tissue, toilet paper, bathroom tissue"
    assert not any(name.startswith("class_") for name in names)


def test_labels_get_the_shipped_names_without_a_metadata_file(imagenet_source, tmp_path):
    source, _ = imagenet_source
    (source / "imagenet_metadata.txt").unlink()
    out = tmp_path / "imagenet"
    dataset_factory.download_and_convert("imagenet", str(out), options=dataset_utils.ConvertOptions(
        source_dir=str(source), train_shards=1, validation_shards=1))
    assert (out / "labels.txt").read_text().splitlines() == [
        "0:background", "1:tench, Tinca tinca", "2:goldfish, Carassius auratus"]


@pytest.mark.parametrize("labels_offset, first", [(0, "background"),
                                                  (1, "tench, Tinca tinca")])
def test_evaluation_reports_name_the_classes_of_1001_and_1000_class_nets(labels_offset,
                                                                         first):
    from cli import assembly, eval_job
    data = assembly.DataConfig(dataset_name="imagenet", dataset_split_name="validation",
                               dataset_dir=None, model_name="resnet_v1_50", batch_size=1,
                               labels_offset=labels_offset)
    names = eval_job._class_names(data, 1001 - labels_offset)
    assert len(names) == 1001 - labels_offset
    assert names[0] == first and names[-1].startswith("toilet tissue")


def test_an_imagenet_export_names_its_classes(tmp_path):
    """A 1000-class net (--labels_offset=1, as VGG and ResNet v1): labels.txt and the
    SavedModel's class_names carry the words, in the dataset's numbering."""
    from cli import export_job
    from export import pipeline
    targets = pipeline.resolve_targets(["saved_model"], export_dir=str(tmp_path))
    export_job.export(
        export_job.ExportConfig(model_name="lenet", dataset_name="imagenet", labels_offset=1,
                                num_parity_examples=2),
        pipeline.ExportRequest(targets, labels_dir=str(tmp_path)))
    labels = (tmp_path / "labels.txt").read_text().splitlines()
    assert labels[:2] == ["0:background", "1:tench, Tinca tinca"] and len(labels) == 1001
    serve = tf.saved_model.load(targets["saved_model"]).signatures["serving_preprocessed"]
    outputs = serve(images=tf.zeros([1, 28, 28, 3]))
    label = int(outputs["classes"][0])
    assert 1 <= label <= 1000
    assert outputs["class_names"][0].numpy().decode() == labels[label].split(":", 1)[1]


def test_a_webp_with_alpha_is_stored_as_rgb_jpeg(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    folder = tmp_path / "ilsvrc" / "train" / SYNSETS[0]
    folder.mkdir(parents=True)
    buffer = io.BytesIO()
    pil.new("RGBA", (12, 10), (10, 200, 30, 128)).save(buffer, "WEBP")
    (folder / f"{SYNSETS[0]}_0.JPEG").write_bytes(buffer.getvalue())
    out = tmp_path / "imagenet"
    dataset_factory.download_and_convert("imagenet", str(out), options=dataset_utils.ConvertOptions(
        source_dir=str(tmp_path / "ilsvrc"), train_shards=1, validation_shards=1))
    (example,) = _records(out, "train")
    data = example.features.feature["image/encoded"].bytes_list.value[0]
    assert image_coding.sniff_format(data) == "jpeg"
    assert image_coding.jpeg_num_components(data) == 3
