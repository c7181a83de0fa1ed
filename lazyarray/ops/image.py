"""``la.image_decode``: an encoded image (the bytes of a PNG, JPEG, BMP, TIFF, WebP, PNM or JPEG 2000
file, as a 1-D uint8 array) decoded to an (H, W, C) uint8 array: ONNX's ``ImageDecoder``.

The decoding is Pillow's (the ``onnx`` extra; imported when the kernel first runs), the library
ONNX's reference implementation decodes with, so the pixels are the reference's. The output's
height and width are known only from the bytes (a data-dependent shape, as ``nonzero``'s count).

Only the formats ONNX names are opened: Pillow would also open formats whose plugins run
external programs (EPS through Ghostscript), and a model's input must never run code.
``pixel_format``: ``"RGB"`` and ``"BGR"`` give 3 channels (an image stored with another mode,
such as palette or RGBA, is converted to RGB first), ``"Grayscale"`` one (luma, Pillow's "L").
"""
from __future__ import annotations

import io

import numpy as np

from ..aval import check_alloc
from ..errors import DTypeError, LazyArrayError, OpValueError, ShapeError, fmt_shape
from .params import Param, choice
from .registry import OpDef, register

# Pillow's format names for the encodings ONNX's ImageDecoder lists.
FORMATS = ("PNG", "JPEG", "BMP", "TIFF", "WEBP", "PPM", "JPEG2000")


def _decode(xp, encoded, pixel_format="RGB", out=None):
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as exc:
        raise ImportError("image_decode needs Pillow: pip install 'lazyarray[onnx]' (or pillow)") from exc
    data = np.asarray(encoded) if xp is np else encoded.get()  # (decoding is host work)
    channels = 1 if pixel_format == "Grayscale" else 3
    try:
        with Image.open(io.BytesIO(data.tobytes()), formats=FORMATS) as img:
            # the size the header claims, checked before any pixel is decoded
            check_alloc("image_decode", (img.height, img.width, channels), np.uint8, "decoded image")
            img.load()
            if pixel_format == "Grayscale":
                pixels = np.asarray(img.convert("L"))[:, :, None]
            else:
                pixels = np.asarray(img if img.mode == "RGB" else img.convert("RGB"))
                if pixel_format == "BGR":
                    pixels = pixels[:, :, ::-1]
    except Image.DecompressionBombError as exc:
        raise OpValueError(f"image_decode: the {data.size} bytes claim an image above Pillow's decompression-bomb "
                           f"limit ({exc}); raise PIL.Image.MAX_IMAGE_PIXELS if the image is trusted") from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise OpValueError(f"image_decode: the {data.size} bytes are not an image in a format it reads "
                           f"({', '.join(FORMATS)}): {exc}") from exc
    except (LazyArrayError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 (Pillow's plugins raise SyntaxError, struct.error, EOFError, ...)
        raise OpValueError(f"image_decode: the {data.size} bytes are not an image Pillow can decode "
                           f"({type(exc).__name__}: {exc})") from exc
    return xp.asarray(np.ascontiguousarray(pixels, dtype=np.uint8))


def _shape(shapes, pixel_format="RGB"):
    if len(shapes[0]) != 1:
        raise ShapeError(f"image_decode takes the encoded bytes as a 1-D array, got shape {fmt_shape(shapes[0])}")
    return (None, None, 1 if pixel_format == "Grayscale" else 3)


def _dtype(dtypes, **_):
    if dtypes[0] != np.uint8:
        raise DTypeError(f"image_decode takes the encoded bytes as uint8, got {dtypes[0]}")
    return np.dtype(np.uint8)


register(OpDef("image_decode", ("encoded",), _decode, params=(
    Param("pixel_format", choice("RGB", "BGR", "Grayscale"), "RGB",
          doc="'RGB' or 'BGR': 3 channels; 'Grayscale': 1 (luma)"),),
    shape=_shape, dtype=_dtype,
    doc="the image whose file bytes (PNG, JPEG, BMP, TIFF, WebP, PNM, JPEG 2000) encoded holds, as "
        "(height, width, channels) uint8, decoded by Pillow; height and width depend on the data"))
