"""Finding text drawn with core.pixel_font in an image (TensorBoard pictures)."""
import numpy as np

from core import pixel_font


def ink(image: np.ndarray, color=(0, 0, 0)) -> np.ndarray:
    """Bool [H, W]: the pixels of exactly `color` in an [H, W, 3] image."""
    return np.all(image[..., :3] == np.array(color, image.dtype), axis=-1)


def find_text(image: np.ndarray, text: str, scale: int, color=(0, 0, 0)) -> list:
    """[(top, left)] of every place where `text`, rendered at `scale`, is drawn in
    `color` pixel for pixel (its ink exactly, and no other ink inside its box)."""
    mask = ink(image, color)
    template = pixel_font.render(text, scale)
    height, width = template.shape
    first_row = next(r for r in range(height) if template[r].any())
    row_bytes = template[first_row].tobytes()
    found = []
    for top in range(mask.shape[0] - height + 1):
        line = mask[top + first_row].tobytes()
        start = line.find(row_bytes)
        while start != -1:
            if (start + width <= mask.shape[1]
                    and np.array_equal(mask[top:top + height, start:start + width],
                                       template)):
                found.append((top, start))
            start = line.find(row_bytes, start + 1)
    return found
