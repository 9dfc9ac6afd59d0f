"""Any prepared TensorFlow Datasets dataset by name: --dataset_name=tfds:<name>[/<config>].

--dataset_dir is the TFDS data_dir. Reading is offline: the prepared files are found
on disk (<data_dir>/<name>/[<config>/]<version>/dataset_info.json) and read through our
own input pipeline (file-level sharding, robust decoding), never through tfds.load,
which would try the network for ~200 s when something is missing. Splits are TFDS's
split names; classes and label names come from the dataset's ClassLabel feature.

Preparing needs the network. Offline, TFDS's downloader retries for ~200 s and ends
in a traceback, so a short request to the dataset's download host goes first: when it
cannot be reached, the script ends at once in one line naming the files and the
directory to put them in (TFDS's manual_dir, which its download manager reads first).
"""
import os
import socket
import urllib.error
import urllib.parse
import urllib.request

import tensorflow as tf

from core.errors import UsageError
from datasets import dataset_utils

PREFIX = "tfds:"
# Seconds to wait for the download host: a live network answers in well under this.
PROBE_TIMEOUT = 5
_FILES_NAMED = 4  # in the offline message; the rest are counted


def _tfds():
    import tensorflow_datasets as tfds  # slow to import; only TFDS users pay for it
    return tfds


def _parse_name(name: str) -> tuple[str, str | None]:
    spec = name[len(PREFIX):]
    dataset, _, config = spec.partition("/")
    if not dataset:
        raise UsageError(f"--dataset_name={name} names no TFDS dataset; use e.g. "
                         f"{PREFIX}oxford_flowers102 or {PREFIX}<name>/<config>.")
    return dataset, config or None


def _version_key(version: str):
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _prepare_hint(name: str, data_dir: str) -> str:
    return (f"prepare it once (needs the network): python download_and_convert_data.py "
            f"--dataset_name={name} --dataset_dir={data_dir}")


def builder_dir(name: str, data_dir: str) -> str:
    """The newest prepared version's directory; UsageError naming the fix if none."""
    dataset, config = _parse_name(name)
    base = os.path.join(data_dir, dataset, *([config] if config else []))
    versions = sorted(
        (entry for entry in tf.io.gfile.glob(os.path.join(base, "*"))
         if tf.io.gfile.exists(os.path.join(entry, "dataset_info.json"))),
        key=lambda path: _version_key(os.path.basename(path)))
    if not versions:
        # <data_dir>/<dataset>/<config>/<version>/dataset_info.json: the config is two up.
        configs = [os.path.basename(os.path.dirname(os.path.dirname(p)))
                   for p in tf.io.gfile.glob(
                       os.path.join(data_dir, dataset, "*", "*", "dataset_info.json"))]
        if configs and not config:
            raise UsageError(f"TFDS dataset {dataset} in {data_dir} has configs "
                             f"{', '.join(sorted(set(configs)))}; pick one with "
                             f"--dataset_name={PREFIX}{dataset}/<config>.")
        raise UsageError(f"TFDS dataset {name[len(PREFIX):]} is not prepared in "
                         f"{data_dir}; {_prepare_hint(name, data_dir)}.")
    return versions[-1]


def _builder(name: str, data_dir: str):
    return _tfds().builder_from_directory(builder_dir(name, data_dir))


def _image_and_label_keys(info, name: str) -> tuple[str, str]:
    tfds = _tfds()
    features = info.features
    if info.supervised_keys and len(info.supervised_keys) == 2:
        image_key, label_key = info.supervised_keys
        if isinstance(image_key, str) and isinstance(label_key, str):
            return image_key, label_key
    images = [k for k, f in features.items() if isinstance(f, tfds.features.Image)]
    labels = [k for k, f in features.items() if isinstance(f, tfds.features.ClassLabel)]
    if len(images) != 1 or len(labels) != 1:
        raise UsageError(f"{name} has image features {images} and class labels {labels}; "
                         f"an image classifier needs exactly one of each.")
    return images[0], labels[0]


def load_info(name: str, data_dir: str) -> dataset_utils.DatasetInfo:
    info = _builder(name, data_dir).info
    image_key, label_key = _image_and_label_keys(info, name)
    label_feature = info.features[label_key]
    channels = info.features[image_key].shape[-1] or 3
    return dataset_utils.DatasetInfo(
        name=name,
        splits_to_sizes={split: info.splits[split].num_examples for split in info.splits},
        num_classes=label_feature.num_classes,
        file_pattern="",
        image_shape=(None, None, channels),
        class_names=tuple(label_feature.names),
        items_to_descriptions={"image": f"TFDS feature {image_key!r}",
                               "label": f"TFDS feature {label_key!r}"},
    )


def split_fields(name: str, split_name: str, data_dir: str) -> dict:
    """The fields of a dataset_factory.DatasetSpec for one split of a TFDS dataset."""
    tfds = _tfds()
    builder = _builder(name, data_dir)
    info = builder.info
    if split_name not in info.splits:
        raise UsageError(f"Unknown split {split_name!r} for {name}; use one of: "
                         f"{', '.join(info.splits)}.")
    image_key, label_key = _image_and_label_keys(info, name)
    dataset_info = load_info(name, data_dir)
    features = info.features
    decoders = {image_key: tfds.decode.SkipDecoding()}

    def parse(serialized):
        example = features.deserialize_example(serialized, decoders=decoders)
        return {"encoded": example[image_key],
                "label": tf.cast(example[label_key], tf.int64),
                "bboxes": tf.zeros([0, 4], tf.float32)}

    split = info.splits[split_name]
    return dict(
        name=name, split_name=split_name, file_pattern=builder_dir(name, data_dir),
        num_samples=split.num_examples, num_classes=dataset_info.num_classes,
        labels_to_names=dataset_info.labels_to_names(),
        image_shape=dataset_info.image_shape,
        items_to_descriptions=dict(dataset_info.items_to_descriptions),
        dataset_dir=data_dir, parse=parse,
        files=tuple(str(path) for path in split.filepaths))


def manual_dir(data_dir: str) -> str:
    """Where TFDS looks for files downloaded by hand before it downloads them."""
    return os.path.join(data_dir, "downloads", "manual")


def _unreachable(url: str, timeout: float) -> str | None:
    """Why url's host cannot be reached (through the *_proxy of the environment, as
    TFDS's downloader goes), or None when it answers (any HTTP status)."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                               timeout=timeout).close()
    except urllib.error.HTTPError:
        return None  # the host (or the proxy) answered
    except (urllib.error.URLError, socket.timeout, OSError) as error:
        reason = getattr(error, "reason", error)
        return (f"no answer in {timeout:g} s" if isinstance(reason, socket.timeout)
                else str(reason).splitlines()[0] or type(reason).__name__)
    return None


def _files_hint(urls: list[str]) -> str:
    names = [urllib.parse.urlparse(url).path.rsplit("/", 1)[-1] or url for url in urls]
    shown = ", ".join(names[:_FILES_NAMED])
    return shown + (f" and {len(names) - _FILES_NAMED} more" if len(names) > _FILES_NAMED
                    else "")


def _check_downloadable(builder, full_name: str, data_dir: str):
    """One line at once instead of TFDS's retries: files to fetch by hand that are not
    there, or a download host that does not answer."""
    manual = manual_dir(data_dir)
    has_manual_files = os.path.isdir(manual) and os.listdir(manual)
    if getattr(builder, "MANUAL_DOWNLOAD_INSTRUCTIONS", None) and not has_manual_files:
        raise UsageError(f"TFDS dataset {full_name} must be downloaded by hand: put its "
                         f"files in {manual} (TFDS's manual_dir; see "
                         f"https://www.tensorflow.org/datasets/catalog/{builder.name}) "
                         f"and run again.")
    urls = sorted(builder.url_infos or {})
    if not urls:
        return  # unknown before preparing starts; TFDS's errors are caught then
    reason = _unreachable(urls[0], PROBE_TIMEOUT)
    if reason:
        host = urllib.parse.urlparse(urls[0]).hostname
        bases = {url.rsplit("/", 1)[0] for url in urls}
        origin = f", from {bases.pop()}/" if len(bases) == 1 else ""
        raise UsageError(f"Cannot reach {host} to download TFDS dataset {full_name} "
                         f"({reason}); put its files ({_files_hint(urls)}{origin}) in "
                         f"{manual} (TFDS's manual_dir) and run again, "
                         f"{_elsewhere_hint(builder.name, data_dir)}.")


def _elsewhere_hint(dataset: str, data_dir: str) -> str:
    return (f"or prepare it on a connected machine and copy the {dataset}/ directory of "
            f"its data_dir into {data_dir}")


def download_and_prepare(name: str, data_dir: str) -> None:
    """Downloads and prepares a TFDS dataset into data_dir (the one step needing the
    network); a dataset already prepared there is left as it is."""
    dataset, config = _parse_name(name)
    try:
        builder_dir(name, data_dir)
        return
    except UsageError:
        pass
    tfds = _tfds()
    full_name = f"{dataset}/{config}" if config else dataset
    try:
        builder = tfds.builder(full_name, data_dir=data_dir)
    except Exception as error:  # tfds raises several types for an unknown name
        raise UsageError(f"TFDS has no dataset {full_name!r} ({str(error).splitlines()[0]}); "
                         f"check the name at https://www.tensorflow.org/datasets/catalog."
                         ) from None
    _check_downloadable(builder, full_name, data_dir)
    import requests  # a TFDS dependency; its errors are the downloader's
    try:
        builder.download_and_prepare(
            download_dir=os.path.join(data_dir, "downloads"),
            download_config=tfds.download.DownloadConfig(manual_dir=manual_dir(data_dir)))
    except (requests.exceptions.RequestException, tfds.download.DownloadError) as error:
        url = getattr(getattr(error, "request", None), "url", None)
        reason = (f"no connection to {urllib.parse.urlparse(url).hostname}" if url
                  else str(error).splitlines()[0] or type(error).__name__)
        raise UsageError(f"Downloading TFDS dataset {full_name} failed ({reason}); put its "
                         f"files in {manual_dir(data_dir)} (TFDS's manual_dir) and run "
                         f"again, {_elsewhere_hint(builder.name, data_dir)}.") from None
