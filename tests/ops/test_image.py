"""la.image_decode (lazyarray/ops/image.py): lossless files decode to the pixels that were saved, other
modes convert as the pixel format asks, and bytes that are no image of ONNX's formats are refused by
name (never handed to a Pillow plugin that runs programs)."""
from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import DTypeError, OpValueError, ShapeError

Image = pytest.importorskip("PIL.Image")
decode = la.image_decode
RNG = np.random.default_rng(0)


def _file(pixels, fmt, mode=None) -> la.NDArray:
    buf = io.BytesIO()
    Image.fromarray(pixels, mode).save(buf, format=fmt)
    return la.array(np.frombuffer(buf.getvalue(), np.uint8).copy())


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "TIFF", "PPM"])
def test_lossless_files_give_back_the_saved_pixels(fmt):
    rgb = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(decode(_file(rgb, fmt)).asnumpy(), rgb)
    np.testing.assert_array_equal(decode(_file(rgb, fmt), pixel_format="BGR").asnumpy(), rgb[:, :, ::-1])


def test_other_modes_convert_as_the_pixel_format_asks():
    gray = RNG.integers(0, 256, (4, 6), dtype=np.uint8)
    got = decode(_file(gray, "PNG"))  # a grayscale file asked as RGB: three equal channels (ONNX's spec)
    np.testing.assert_array_equal(got.asnumpy(), np.repeat(gray[:, :, None], 3, axis=2))
    np.testing.assert_array_equal(decode(_file(gray, "PNG"), pixel_format="Grayscale").asnumpy(), gray[:, :, None])
    rgba = RNG.integers(0, 256, (3, 3, 4), dtype=np.uint8)
    np.testing.assert_array_equal(decode(_file(rgba, "PNG")).asnumpy(), rgba[:, :, :3])


def test_the_shape_is_known_only_from_the_bytes():
    rgb = RNG.integers(0, 256, (6, 2, 3), dtype=np.uint8)
    op = la.CachedOp(la.sym.image_decode(la.sym.var("f", shape=(None,), dtype="uint8")))
    for pixels in (rgb, rgb[:3]):
        np.testing.assert_array_equal(op(_file(np.ascontiguousarray(pixels), "PNG")).asnumpy(), pixels)


def test_bytes_of_no_image_and_formats_onnx_does_not_name_are_refused():
    with pytest.raises(OpValueError, match="not an image in a format it reads"):
        decode(la.array(np.frombuffer(b"definitely not an image", np.uint8).copy()))
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 1 1\n"  # Pillow's EPS plugin would run Ghostscript
    with pytest.raises(OpValueError, match="not an image"):
        decode(la.array(np.frombuffer(eps, np.uint8).copy()))


def test_inputs_must_be_one_dimensional_bytes():
    with pytest.raises(ShapeError, match="1-D"):
        la.sym.image_decode(la.sym.var("f", shape=(2, 3), dtype="uint8"))
    with pytest.raises(DTypeError, match="uint8"):
        la.sym.image_decode(la.sym.var("f", shape=(4,), dtype="float32"))


def _png_header(width: int, height: int) -> np.ndarray:
    """A PNG file that claims ``width`` x ``height`` RGB pixels and holds none (65 bytes)."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    return np.frombuffer(raw, np.uint8).copy()


def test_a_decompression_bomb_is_a_named_error_eager_and_as_a_constant_in_a_graph():
    """Pillow's DecompressionBombError (an Exception of its own) escaped unwrapped from a graph that
    decodes a constant (constant folding ran the kernel bare), and was OpFailed eagerly."""
    bomb = _png_header(100_000, 100_000)
    with pytest.raises(OpValueError, match=r"image_decode: the 65 bytes claim an image above Pillow's "
                       "decompression-bomb limit.*MAX_IMAGE_PIXELS"):
        decode(la.array(bomb))
    with la.deferred():
        y = decode(la.array(bomb))
    with pytest.raises(OpValueError, match="decompression-bomb limit"):
        la.CachedOp(la.get_symbol(y, inputs={}))()


def test_a_decoded_size_above_the_allocation_limit_is_refused_before_decoding(monkeypatch):
    monkeypatch.setattr(la.config, "max_alloc_bytes", 1000)
    with pytest.raises(la.OutOfMemoryError, match=r"image_decode: decoded image uint8\[100,200,3\] needs 60000 bytes"):
        decode(la.array(_png_header(200, 100)))
