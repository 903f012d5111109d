#!/usr/bin/env python3
"""convert.py - convert the real scans fetched by datasets/fetch to KITTI .bin files.

Standard library only (gzip, bz2, struct, math). Usage:

    convert.py vlp16   IN.rawlog(.gz) OUT.bin   # MRPT rawlog holding raw Velodyne VLP-16 packets
    convert.py octomap IN.dat(.bz2)   OUT.bin   # OctoMap scan.dat: text lines "x y z"

KITTI .bin = float32 little-endian rows (x, y, z, intensity).

VLP-16 decoding: every 100-byte data block starts with the flag bytes 0xFF 0xEE, then the
azimuth (uint16 LE, 0.01 degree), then 32 returns of (uint16 LE distance in 2 mm units, uint8
reflectivity). Returns 0..15 are the first firing sequence at the block's azimuth; returns
16..31 are the second sequence, whose azimuth is interpolated half-way to the next block's
azimuth (the previous step is reused for the last block). Laser i % 16 has the elevation
ELEVATIONS[i % 16]. Distance 0 = no return (skipped). Velodyne convention:
x = r cos(el) sin(az), y = r cos(el) cos(az), z = r sin(el); intensity = reflectivity / 255.

OctoMap scan.dat: lines of "x y z"; lines starting with "NODE" (sensor poses) are skipped;
intensity = 0.
"""
import bz2
import gzip
import math
import struct
import sys

ELEVATIONS = (-15, 1, -13, 3, -11, 5, -9, 7, -7, 9, -5, 11, -3, 13, -1, 15)
BLOCK = 100


def _open_bytes(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        return gzip.decompress(raw)
    if raw[:3] == b"BZh":
        return bz2.decompress(raw)
    return raw


def vlp16_points(data):
    """Yield (x, y, z, intensity) for every return of every 0xFFEE block in `data`."""
    starts = []
    pos = data.find(b"\xff\xee")
    while pos >= 0 and pos + BLOCK <= len(data):
        starts.append(pos)
        pos = data.find(b"\xff\xee", pos + BLOCK)
    azimuths = [struct.unpack_from("<H", data, s + 2)[0] for s in starts]
    points = []
    for bi, s in enumerate(starts):
        az0 = azimuths[bi]
        if bi + 1 < len(starts):
            step = (azimuths[bi + 1] - az0) % 36000
        elif bi > 0:
            step = (az0 - azimuths[bi - 1]) % 36000
        else:
            step = 0
        for i in range(32):
            dist, refl = struct.unpack_from("<HB", data, s + 4 + 3 * i)
            if dist == 0:
                continue
            az = az0 if i < 16 else (az0 + step / 2.0) % 36000
            r = dist * 0.002
            el = math.radians(ELEVATIONS[i % 16])
            a = math.radians(az / 100.0)
            points.append((r * math.cos(el) * math.sin(a), r * math.cos(el) * math.cos(a),
                           r * math.sin(el), refl / 255.0))
    return points, len(starts)


def octomap_points(text):
    points = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].upper() == "NODE":
            continue
        if len(parts) < 3:
            raise ValueError("bad line in scan: %r" % line)
        points.append((float(parts[0]), float(parts[1]), float(parts[2]), 0.0))
    return points


def write_kitti(path, points):
    with open(path, "wb") as f:
        for p in points:
            f.write(struct.pack("<4f", *p))


def main(argv):
    if len(argv) != 4 or argv[1] not in ("vlp16", "octomap"):
        sys.stderr.write("usage: convert.py vlp16|octomap IN OUT.bin\n")
        return 2
    data = _open_bytes(argv[2])
    if argv[1] == "vlp16":
        points, blocks = vlp16_points(data)
        what = "%d blocks" % blocks
    else:
        points = octomap_points(data.decode("ascii"))
        what = "text"
    if not points:
        sys.stderr.write("convert.py: no points decoded from %s\n" % argv[2])
        return 1
    write_kitti(argv[3], points)
    print("%s: %d points (%s) -> %s" % (argv[2], len(points), what, argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
