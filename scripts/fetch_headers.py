"""Fetches a Hugging Face checkpoint's config and safetensors headers, never its data.

    python3 scripts/fetch_headers.py REPO_ID FOLDER [--revision REV] [--endpoint URL]
    python3 scripts/fetch_headers.py REPO_ID FOLDER --gguf FILE.gguf

then

    kv fit FOLDER/config.json --headers-only --gpu H100 ...
    kv fit FOLDER/FILE.gguf --headers-only --engine llama.cpp --gpu H100 ...

For each shard the index names (or `model.safetensors` where the repository
has no index), it asks for bytes 0-7, the header's length N, then bytes 8 to
8 + N - 1, and writes those 8 + N bytes: a few KiB to a few MiB in all,
where the checkpoint is gigabytes. `config.json` and
`model.safetensors.index.json` are fetched whole. A gated repository needs
a token: HF_TOKEN in the environment, as huggingface_hub reads it. The
endpoint is --endpoint, else HF_ENDPOINT, else https://huggingface.co; a
`file://` folder laid out as `REPO_ID/resolve/REV/FILE` serves too.

A GGUF gives no header length up front: --gguf fetches its first MiB, reads
the metadata and tensor infos as far as they go, and fetches the rest in
doubling steps until they end (at most 256 MiB: a published GGUF's
vocabulary takes a few MiB), then writes the file up to there.

Nothing is read past what is asked for: a server that ignores the range
(answering the whole file) is read for the bytes wanted and closed, a header
length above safetensors' 100,000,000 bytes is refused, and so is an answer
shorter than asked. Standard library only.
"""

import argparse
import json
import os
import struct
import sys
import urllib.error
import urllib.parse
import urllib.request

# safetensors' MAX_HEADER_SIZE, and kv's limits on the files fetched whole.
MAX_HEADER_BYTES = 100_000_000
MAX_CONFIG_BYTES = 16 << 20
MAX_INDEX_BYTES = 64 << 20
GGUF_FIRST_BYTES = 1 << 20
MAX_GGUF_HEADER_BYTES = 256 << 20
# GGUF value types (gguf.h): fixed sizes; 8 is a string, 9 an array.
GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


class Missing(Exception):
    """The repository has no such file."""


class Source:
    def __init__(self, endpoint, repo, revision, token):
        self.base = f"{endpoint.rstrip('/')}/{repo}/resolve/{urllib.parse.quote(revision, safe='')}/"
        self.token = token

    def read(self, name, begin, length, whole=False, at_most=False):
        """Bytes begin..begin+length of `name` (at most `length` where `whole`:
        the file, which must be no longer; fewer where `at_most` and the file
        ends first)."""
        url = self.base + urllib.parse.quote(name)
        request = urllib.request.Request(url)
        if not whole:
            request.add_header("Range", f"bytes={begin}-{begin + length - 1}")
        if self.token and url.startswith(("https://", "http://")):
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            response = urllib.request.urlopen(request, timeout=60)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise Missing(name) from None
            if e.code == 416 and at_most:
                return b""
            hint = " (a gated repository: set HF_TOKEN)" if e.code in (401, 403) else ""
            sys.exit(f"{url}: HTTP {e.code} {e.reason}{hint}")
        except urllib.error.URLError as e:
            if isinstance(e.reason, FileNotFoundError):
                raise Missing(name) from None
            sys.exit(f"{url}: {e.reason}")
        with response:
            # 206: the range alone. Anything else is the whole file: skip to it.
            status = getattr(response, "status", None)
            skip = 0 if (whole or status == 206) else begin
            while skip:
                step = response.read(min(skip, 1 << 20))
                if not step:
                    if at_most:
                        return b""
                    sys.exit(f"{url}: the file ends before byte {begin}")
                skip -= len(step)
            data = response.read(length + 1 if whole else length)
        if whole and len(data) > length:
            sys.exit(f"{url}: larger than the {length} bytes kv reads of it")
        if not whole and not at_most and len(data) != length:
            sys.exit(f"{url}: asked for bytes {begin} to {begin + length - 1}, got {len(data)} "
                     "bytes: the file ends inside its header, or the server cut the answer")
        return data


def shards(index_bytes, name):
    try:
        index = json.loads(index_bytes)
        files = sorted(set(index["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"{name}: not a safetensors index ({e})")
    for f in files:
        if not isinstance(f, str) or not f or f in (".", "..") or "/" in f or "\\" in f:
            sys.exit(f"{name}: `weight_map` names {f!r}, which is not a file name")
    return files


def header(source, name):
    (length,) = struct.unpack("<Q", source.read(name, 0, 8))
    if length > MAX_HEADER_BYTES:
        sys.exit(f"{name}: the header length (bytes 0 to 7) is {length}; safetensors refuses "
                 f"headers above {MAX_HEADER_BYTES} bytes")
    return struct.pack("<Q", length) + source.read(name, 8, length) if length else b"\0" * 8


class Short(Exception):
    """The bytes at hand end inside the header."""


class Cursor:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise Short()
        self.at += n
        return self.data[self.at - n:self.at]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64())


def gguf_header_end(data, name):
    """Where the tensor infos of a GGUF starting with `data` end; Short where
    `data` ends before them."""
    c = Cursor(data)
    if c.take(4) != b"GGUF":
        sys.exit(f"{name}: not a GGUF file (no GGUF magic at byte 0)")
    version = c.u32()
    if version not in (2, 3):
        sys.exit(f"{name}: GGUF version {version}; kv reads versions 2 and 3")
    tensors, entries = c.u64(), c.u64()
    for _ in range(entries):
        c.string()
        kind = c.u32()
        if kind == 9:
            kind, count = c.u32(), c.u64()
        else:
            count = 1
        if kind == 8:
            for _ in range(count):
                c.string()
        elif kind in GGUF_SIZES:
            c.take(GGUF_SIZES[kind] * count)
        else:
            sys.exit(f"{name}: metadata value type {kind} at byte {c.at - 4} is not GGUF's")
    for _ in range(tensors):
        c.string()
        dims = c.u32()
        if dims > 4:
            sys.exit(f"{name}: a tensor info at byte {c.at - 4} has {dims} dimensions")
        c.take(8 * dims + 4 + 8)
    return c.at


def gguf_header(source, name):
    """The bytes of a GGUF up to the end of its tensor infos."""
    data = source.read(name, 0, GGUF_FIRST_BYTES, whole=False, at_most=True)
    while True:
        try:
            return data[:gguf_header_end(data, name)]
        except Short:
            pass
        if len(data) < GGUF_FIRST_BYTES or len(data) >= MAX_GGUF_HEADER_BYTES:
            what = "the file ends" if len(data) < GGUF_FIRST_BYTES else "kv reads no further"
            sys.exit(f"{name}: the metadata and tensor infos run past byte {len(data)}, where "
                     f"{what}")
        more = min(len(data), MAX_GGUF_HEADER_BYTES - len(data))
        got = source.read(name, len(data), more, whole=False, at_most=True)
        if not got:
            sys.exit(f"{name}: the metadata and tensor infos run past byte {len(data)}, where "
                     "the file ends")
        data += got
        if len(got) < more:
            # The file ended: what there is must hold the header.
            try:
                return data[:gguf_header_end(data, name)]
            except Short:
                sys.exit(f"{name}: the metadata and tensor infos run past byte {len(data)}, "
                         "where the file ends")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", help="the repository, as owner/name")
    parser.add_argument("folder", help="where to write config.json, the index and the headers")
    parser.add_argument("--revision", default="main")
    parser.add_argument("--endpoint",
                        default=os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    parser.add_argument("--gguf", metavar="FILE.gguf",
                        help="fetch this GGUF's metadata and tensor infos instead")
    args = parser.parse_args(argv)
    source = Source(args.endpoint, args.repo, args.revision, os.environ.get("HF_TOKEN"))
    os.makedirs(args.folder, exist_ok=True)
    if args.gguf:
        if args.gguf.startswith("/") or ".." in args.gguf.split("/"):
            sys.exit(f"--gguf {args.gguf}: not a file of the repository")
        try:
            data = gguf_header(source, args.gguf)
        except Missing:
            sys.exit(f"{args.repo}: no {args.gguf} at revision {args.revision}")
        path = os.path.join(args.folder, os.path.basename(args.gguf))
        with open(path, "wb") as f:
            f.write(data)
        print(f"{path}: {len(data)} bytes of metadata and tensor infos; kv fit {path} "
              "--headers-only --engine llama.cpp ...")
        return
    written = {}
    try:
        written["config.json"] = source.read("config.json", 0, MAX_CONFIG_BYTES, whole=True)
    except Missing:
        sys.exit(f"{args.repo}: no config.json at revision {args.revision}")
    try:
        index = source.read(INDEX, 0, MAX_INDEX_BYTES, whole=True)
        written[INDEX] = index
        names = shards(index, INDEX)
    except Missing:
        names = [SINGLE]
    for name in names:
        try:
            written[name] = header(source, name)
        except Missing:
            sys.exit(f"{args.repo}: no {name} (kv reads safetensors headers; a repository of "
                     ".bin files has none)")
    total = 0
    for name, data in written.items():
        with open(os.path.join(args.folder, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"{args.folder}: {len(written)} files, {total} bytes ({len(names)} shard header(s)); "
          f"kv fit {os.path.join(args.folder, 'config.json')} --headers-only ...")


if __name__ == "__main__":
    main()
