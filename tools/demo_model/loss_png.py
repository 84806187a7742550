"""A loss curve as a PNG with the standard library only (zlib, struct): the GPU machine's
Python has no plotting package that this repository may rely on.

plot(path, series, width, height): series is a list of (points, rgb) with points as
(x, y) pairs. Axes span the union of the points; grey grid lines at every 1.0 of y and
at 10 evenly spaced x values. No text: the caption goes in the model card.
"""
import math
import struct
import zlib

MARGIN = 24
GRID = (225, 225, 225)
AXIS = (60, 60, 60)


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode_png(pixels, width, height):
    """pixels: bytearray of width*height RGB triples, row-major from the top."""
    rows = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, 9)) + \
        _chunk(b"IEND", b"")


class Canvas:
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.pixels = bytearray([255] * (width * height * 3))

    def dot(self, x, y, rgb, radius=0):
        for dy in range(-radius, radius + 1):
            for dx in range(-radius, radius + 1):
                px, py = x + dx, y + dy
                if 0 <= px < self.width and 0 <= py < self.height:
                    i = (py * self.width + px) * 3
                    self.pixels[i:i + 3] = bytes(rgb)

    def line(self, x0, y0, x1, y1, rgb, radius=0):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            self.dot(round(x0 + (x1 - x0) * s / steps), round(y0 + (y1 - y0) * s / steps), rgb, radius)


def plot(path, series, width=720, height=400):
    xs = [x for points, _ in series for x, _ in points]
    ys = [y for points, _ in series for _, y in points]
    if not xs:
        raise ValueError("plot: no points")
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y_lo, y_hi = math.floor(min(ys)), math.ceil(max(ys)) if math.ceil(max(ys)) > math.floor(min(ys)) else math.floor(min(ys)) + 1
    canvas = Canvas(width, height)

    def to_px(x, y):
        px = MARGIN + (x - x_lo) / (x_hi - x_lo) * (width - 2 * MARGIN)
        py = height - MARGIN - (y - y_lo) / (y_hi - y_lo) * (height - 2 * MARGIN)
        return round(px), round(py)

    for level in range(int(y_lo), int(y_hi) + 1):
        a, b = to_px(x_lo, level), to_px(x_hi, level)
        canvas.line(a[0], a[1], b[0], b[1], GRID)
    for k in range(11):
        x = x_lo + (x_hi - x_lo) * k / 10
        a, b = to_px(x, y_lo), to_px(x, y_hi)
        canvas.line(a[0], a[1], b[0], b[1], GRID)
    origin, x_end, y_end = to_px(x_lo, y_lo), to_px(x_hi, y_lo), to_px(x_lo, y_hi)
    canvas.line(origin[0], origin[1], x_end[0], x_end[1], AXIS)
    canvas.line(origin[0], origin[1], y_end[0], y_end[1], AXIS)
    for points, rgb in series:
        pixels = [to_px(x, y) for x, y in points]
        for a, b in zip(pixels, pixels[1:]):
            canvas.line(a[0], a[1], b[0], b[1], rgb, radius=1)
        if len(pixels) == 1:
            canvas.dot(pixels[0][0], pixels[0][1], rgb, radius=2)
    with open(path, "wb") as f:
        f.write(encode_png(canvas.pixels, width, height))
