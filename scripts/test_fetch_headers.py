"""Tests of fetch_headers.py against a local server (CI runs them: no network).

    python3 scripts/test_fetch_headers.py
"""

import http.server
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "fetch_headers.py")


def safetensors(tensors):
    """A whole safetensors file: bf16 tensors {name: shape}, data bytes of 0x5a."""
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in sorted(tensors.items()):
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"\x5a" * at


def gguf(vocab, tensors, data=4096):
    """A GGUF v3 file: general.architecture, a string array of `vocab`
    tokens, `tensors` f32 tensor infos of [64]; then padding to 32 and
    `data` bytes. Returns the file and where its tensor infos end."""
    def string(text):
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw
    out = b"GGUF" + struct.pack("<IQQ", 3, tensors, 3)
    out += string("general.architecture") + struct.pack("<I", 8) + string("llama")
    out += string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, vocab)
    out += b"".join(string(f"token{i}") for i in range(vocab))
    out += string("llama.block_count") + struct.pack("<I", 4) + struct.pack("<I", 1)
    for i in range(tensors):
        out += string(f"blk.{i}.w") + struct.pack("<I", 1) + struct.pack("<Q", 64)
        out += struct.pack("<IQ", 0, 256 * i)
    end = len(out)
    out += b"\0" * (-len(out) % 32)
    return out + b"\x5a" * data, end


class Hub(http.server.BaseHTTPRequestHandler):
    files = {}
    honour_range = True
    token = None
    asked = []

    def do_GET(self):
        Hub.asked.append((self.path, self.headers.get("Range")))
        if Hub.token and self.headers.get("Authorization") != f"Bearer {Hub.token}":
            self.send_response(401)
            self.end_headers()
            return
        data = Hub.files.get(self.path)
        if data is None:
            self.send_response(404)
            self.end_headers()
            return
        asked = self.headers.get("Range")
        if asked and Hub.honour_range:
            begin, end = (int(x) for x in asked.removeprefix("bytes=").split("-"))
            part = data[begin:end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {begin}-{begin + len(part) - 1}/{len(data)}")
        else:
            part = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)

    def log_message(self, *args):
        pass


class FetchHeaders(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.endpoint = f"http://127.0.0.1:{cls.server.server_port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()

    def setUp(self):
        Hub.files, Hub.honour_range, Hub.token, Hub.asked = {}, True, None, []
        self.shard1 = safetensors({"a.weight": [64, 32], "b.weight": [32]})
        self.shard2 = safetensors({"c.weight": [128, 64]})
        index = {"metadata": {"total_size": 64 * 32 * 2 + 64 + 128 * 64 * 2},
                 "weight_map": {"a.weight": "s1.safetensors", "b.weight": "s1.safetensors",
                                "c.weight": "s2.safetensors"}}
        self.publish("org/m", {"config.json": b'{"model_type": "llama"}',
                               "model.safetensors.index.json": json.dumps(index).encode(),
                               "s1.safetensors": self.shard1, "s2.safetensors": self.shard2})
        self.out = tempfile.mkdtemp()

    def publish(self, repo, files, revision="main"):
        for name, data in files.items():
            Hub.files[f"/{repo}/resolve/{revision}/{name}"] = data

    def fetch(self, *args, env=None):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              env={**os.environ, "HF_TOKEN": "", **(env or {})})

    def written(self, name):
        with open(os.path.join(self.out, name), "rb") as f:
            return f.read()

    @staticmethod
    def header_of(data):
        return data[:8 + struct.unpack("<Q", data[:8])[0]]

    def test_shards_are_written_as_their_headers_alone(self):
        run = self.fetch("org/m", self.out, "--endpoint", self.endpoint)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written("s1.safetensors"), self.header_of(self.shard1))
        self.assertEqual(self.written("s2.safetensors"), self.header_of(self.shard2))
        self.assertLess(len(self.written("s1.safetensors")), len(self.shard1))
        self.assertEqual(self.written("config.json"), b'{"model_type": "llama"}')
        # Two ranges a shard: the length, then the header; never the data.
        ranges = [r for p, r in Hub.asked if p.endswith("s1.safetensors")]
        n = len(self.header_of(self.shard1)) - 8
        self.assertEqual(ranges, ["bytes=0-7", f"bytes=8-{8 + n - 1}"])

    def test_a_server_that_ignores_the_range_is_read_for_the_header_alone(self):
        Hub.honour_range = False
        run = self.fetch("org/m", self.out, "--endpoint", self.endpoint)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written("s1.safetensors"), self.header_of(self.shard1))

    def test_a_file_endpoint_serves(self):
        hub = tempfile.mkdtemp()
        for path, data in Hub.files.items():
            os.makedirs(os.path.dirname(hub + path), exist_ok=True)
            with open(hub + path, "wb") as f:
                f.write(data)
        run = self.fetch("org/m", self.out, "--endpoint", "file://" + hub)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written("s2.safetensors"), self.header_of(self.shard2))

    def test_without_an_index_the_single_file_is_fetched(self):
        self.publish("org/one", {"config.json": b"{}", "model.safetensors": self.shard2})
        run = self.fetch("org/one", self.out, "--endpoint", self.endpoint)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written("model.safetensors"), self.header_of(self.shard2))

    def test_a_revision_is_asked_for(self):
        self.publish("org/m", {"config.json": b'{"v": 2}'}, revision="v2")
        self.publish("org/m", {"model.safetensors": self.shard2}, revision="v2")
        run = self.fetch("org/m", self.out, "--endpoint", self.endpoint, "--revision", "v2")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written("config.json"), b'{"v": 2}')

    def test_a_gated_repository_names_the_token(self):
        Hub.token = "secret"
        run = self.fetch("org/m", self.out, "--endpoint", self.endpoint)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("HTTP 401", run.stderr)
        self.assertIn("set HF_TOKEN", run.stderr)
        run = self.fetch("org/m", self.out, "--endpoint", self.endpoint,
                         env={"HF_TOKEN": "secret"})
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_a_hostile_header_length_is_refused_unread(self):
        hostile = struct.pack("<Q", 2**64 - 1) + b"{}"
        self.publish("org/h", {"config.json": b"{}", "model.safetensors": hostile})
        run = self.fetch("org/h", self.out, "--endpoint", self.endpoint)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn(f"is {2**64 - 1}; safetensors refuses", run.stderr)
        self.assertEqual([r for p, r in Hub.asked if p.endswith("model.safetensors")],
                         ["bytes=0-7"])

    def test_a_file_ending_inside_its_header_is_refused(self):
        cut = self.shard2[:20]
        self.publish("org/c", {"config.json": b"{}", "model.safetensors": cut})
        run = self.fetch("org/c", self.out, "--endpoint", self.endpoint)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("got 12 bytes", run.stderr)

    def test_an_index_naming_a_path_outside_the_folder_is_refused(self):
        index = {"weight_map": {"a": "../escape.safetensors"}}
        self.publish("org/x", {"config.json": b"{}",
                               "model.safetensors.index.json": json.dumps(index).encode()})
        run = self.fetch("org/x", self.out, "--endpoint", self.endpoint)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("not a file name", run.stderr)

    def test_a_gguf_is_fetched_to_the_end_of_its_tensor_infos(self):
        # 200,000 tokens of about 14 bytes: 2.9 MB of metadata, past the
        # first MiB, so the rest comes in doubling steps.
        whole, end = gguf(200_000, 3, data=1 << 20)
        self.assertGreater(end, 2 << 20)
        self.publish("org/g", {"m.Q8_0.gguf": whole})
        run = self.fetch("org/g", self.out, "--endpoint", self.endpoint, "--gguf", "m.Q8_0.gguf")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.written("m.Q8_0.gguf"), whole[:end])
        ranges = [r for p, r in Hub.asked if p.endswith("m.Q8_0.gguf")]
        self.assertEqual(ranges, ["bytes=0-1048575", "bytes=1048576-2097151",
                                  "bytes=2097152-4194303"])

    def test_a_small_gguf_ends_inside_the_first_mib(self):
        for honour in (True, False):
            Hub.honour_range = honour
            whole, end = gguf(10, 2, data=100)
            self.publish("org/g", {"small.gguf": whole})
            run = self.fetch("org/g", self.out, "--endpoint", self.endpoint, "--gguf",
                             "small.gguf")
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(self.written("small.gguf"), whole[:end])

    def test_ggufs_that_lie_are_refused(self):
        whole, end = gguf(10, 2, data=0)
        cut = whole[:end - 5]
        hostile = bytearray(whole)
        # The token array's count, 2^64 - 1: read as far as the file goes.
        at = whole.index(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 8
        hostile[at:at + 8] = struct.pack("<Q", 2**64 - 1)
        cases = [(cut, "run past byte"), (bytes(hostile), "run past byte"),
                 (b"GGML" + whole[4:], "not a GGUF file"),
                 (whole[:4] + struct.pack("<I", 1) + whole[8:], "GGUF version 1")]
        for data, words in cases:
            self.publish("org/bad", {"x.gguf": data})
            run = self.fetch("org/bad", self.out, "--endpoint", self.endpoint, "--gguf", "x.gguf")
            self.assertNotEqual(run.returncode, 0)
            self.assertIn(words, run.stderr)
        run = self.fetch("org/bad", self.out, "--endpoint", self.endpoint, "--gguf", "../x.gguf")
        self.assertIn("not a file of the repository", run.stderr)
        run = self.fetch("org/bad", self.out, "--endpoint", self.endpoint, "--gguf", "no.gguf")
        self.assertIn("no no.gguf", run.stderr)

    def test_a_repository_of_bin_files_is_refused_naming_why(self):
        self.publish("org/bin", {"config.json": b"{}"})
        run = self.fetch("org/bin", self.out, "--endpoint", self.endpoint)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("no model.safetensors", run.stderr)


if __name__ == "__main__":
    unittest.main()
