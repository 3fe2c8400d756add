"""Fetches a Hugging Face checkpoint's config and safetensors headers, never its data.

    python3 scripts/fetch_headers.py REPO_ID FOLDER [--revision REV] [--endpoint URL]

then

    kv fit FOLDER/config.json --headers-only --gpu H100 ...

For each shard the index names (or `model.safetensors` where the repository
has no index), it asks for bytes 0-7, the header's length N, then bytes 8 to
8 + N - 1, and writes those 8 + N bytes: a few KiB to a few MiB in all,
where the checkpoint is gigabytes. `config.json` and
`model.safetensors.index.json` are fetched whole. A gated repository needs
a token: HF_TOKEN in the environment, as huggingface_hub reads it. The
endpoint is --endpoint, else HF_ENDPOINT, else https://huggingface.co; a
`file://` folder laid out as `REPO_ID/resolve/REV/FILE` serves too.

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
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


class Missing(Exception):
    """The repository has no such file."""


class Source:
    def __init__(self, endpoint, repo, revision, token):
        self.base = f"{endpoint.rstrip('/')}/{repo}/resolve/{urllib.parse.quote(revision, safe='')}/"
        self.token = token

    def read(self, name, begin, length, whole=False):
        """Bytes begin..begin+length of `name` (at most `length` where `whole`:
        the file, which must be no longer)."""
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
            if skip and len(response.read(skip)) != skip:
                sys.exit(f"{url}: the file ends before byte {begin}")
            data = response.read(length + 1 if whole else length)
        if whole and len(data) > length:
            sys.exit(f"{url}: larger than the {length} bytes kv reads of it")
        if not whole and len(data) != length:
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", help="the repository, as owner/name")
    parser.add_argument("folder", help="where to write config.json, the index and the headers")
    parser.add_argument("--revision", default="main")
    parser.add_argument("--endpoint",
                        default=os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    args = parser.parse_args(argv)
    source = Source(args.endpoint, args.repo, args.revision, os.environ.get("HF_TOKEN"))
    os.makedirs(args.folder, exist_ok=True)
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
