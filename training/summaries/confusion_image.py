"""The confusion matrix as a labelled picture for TensorBoard, drawn with numpy.

Rows are the true classes, labelled `<id> <name>`; columns the predicted classes,
labelled by id. Each cell shows its count (empty when 0) on a shade of blue: the share
of the true class's examples predicted as that column, so a good model draws a dark
diagonal. Readable up to about MAX_LABELLED_CLASSES classes; beyond, eval writes a
per-class table instead (training.summaries.eval_summaries).
"""
from typing import Sequence

import numpy as np

from core import pixel_font

MAX_LABELLED_CLASSES = 30
MAX_NAME_LENGTH = 24
_WHITE = np.array([255, 255, 255], np.float32)
_DARK_BLUE = np.array([8, 48, 107], np.float32)
_GRID = np.array([200, 200, 200], np.uint8)
_TEXT_ON_LIGHT, _TEXT_ON_DARK = np.array([0, 0, 0], np.uint8), np.array([255] * 3, np.uint8)
TITLE = 'confusion matrix: rows true class, columns predicted class'
LEGEND = 'cell: count; shade: share of the true class\'s examples'


def _draw_text(image: np.ndarray, text: str, top: int, left: int, scale: int, color):
    mask = pixel_font.render(text, scale)
    height = min(mask.shape[0], image.shape[0] - top)
    width = min(mask.shape[1], image.shape[1] - left)
    image[top:top + height, left:left + width][mask[:height, :width]] = color


def _names(class_names: Sequence[str], count: int) -> list:
    names = list(class_names)[:count] + [''] * (count - len(class_names))
    return [name if len(name) <= MAX_NAME_LENGTH else name[:MAX_NAME_LENGTH - 2] + '..'
            for name in names]


def confusion_image(confusion: np.ndarray, class_names: Sequence[str]) -> np.ndarray:
    """[1, H, W, 3] uint8: the labelled matrix (see the module docstring)."""
    count = confusion.shape[0]
    scale = 2 if count <= 12 else 1
    text_height = pixel_font.GLYPH_HEIGHT * scale
    pad = 4 * scale
    line = text_height + pad
    widest_number = max(len(str(int(confusion.max()))), len(str(count - 1)))
    cell = max(pixel_font.text_width('0' * widest_number, scale) + 2 * pad, line)
    labels = [f'{index} {name}' for index, name in enumerate(_names(class_names, count))]
    label_width = max(pixel_font.text_width(text, scale)
                      for text in labels + ['true class']) + 2 * pad
    grid_left, grid_top = label_width, 3 * line + pad
    width = max(grid_left + count * cell, pixel_font.text_width(TITLE, scale),
                pixel_font.text_width(LEGEND, scale)) + 2 * pad
    height = grid_top + count * cell + line + 2 * pad
    image = np.full((height, width, 3), 255, np.uint8)
    _draw_text(image, TITLE, pad, pad, scale, _TEXT_ON_LIGHT)
    _draw_text(image, 'predicted', pad + line, grid_left, scale, _TEXT_ON_LIGHT)
    _draw_text(image, 'true class', pad + 2 * line, pad, scale, _TEXT_ON_LIGHT)
    totals = np.maximum(confusion.sum(axis=1), 1)
    for column in range(count):
        text = str(column)
        offset = (cell - pixel_font.text_width(text, scale)) // 2
        _draw_text(image, text, pad + 2 * line, grid_left + column * cell + offset, scale,
                   _TEXT_ON_LIGHT)
    for row in range(count):
        top = grid_top + row * cell
        _draw_text(image, labels[row], top + (cell - text_height) // 2, pad, scale,
                   _TEXT_ON_LIGHT)
        for column in range(count):
            left = grid_left + column * cell
            share = confusion[row, column] / totals[row]
            image[top:top + cell, left:left + cell] = _GRID
            image[top + 1:top + cell, left + 1:left + cell] = (
                _WHITE + share * (_DARK_BLUE - _WHITE)).astype(np.uint8)
            if confusion[row, column]:
                text = str(int(confusion[row, column]))
                _draw_text(image, text, top + (cell - text_height) // 2,
                           left + (cell - pixel_font.text_width(text, scale)) // 2, scale,
                           _TEXT_ON_DARK if share > 0.5 else _TEXT_ON_LIGHT)
    right, bottom = grid_left + count * cell, grid_top + count * cell
    image[grid_top:bottom + 1, right] = _GRID  # the grid's closing lines
    image[bottom, grid_left:right + 1] = _GRID
    _draw_text(image, LEGEND, bottom + pad, pad, scale, _TEXT_ON_LIGHT)
    return image[np.newaxis]
