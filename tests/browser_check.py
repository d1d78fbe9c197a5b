"""`make check-browser` (not part of `make test`: it needs Debian's chromium, which the
target installs): the pages hlogen draws, loaded in headless Chromium, checked from the
DOM after the page's script ran and from a screenshot's pixels. Model Explorer's page
(`hlogen view`) too, when the extra hlogen[view] is installed.

Run by the make target as `pytest tests/browser_check.py` (its name keeps it out of the
suite's collection).
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest

from hlogen import drawing
from tests.test_graph import SVG, parse_svg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HLOGEN = [sys.executable, "-m", "hlogen_cli.main"]
SAMPLE = os.path.join(ROOT, "samples", "computations.py")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="no chromium: make check-browser installs Debian's")
# what the page's nodes are filled with: ops, parameters
OP_FILL, PARAMETER_FILL = (tuple(bytes.fromhex(drawing.NODE_FILL[k][1:])) for k in ("op", "parameter"))


def chromium(*args, timeout=120) -> bytes:
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--hide-scrollbars", "--no-first-run", *args],
                         capture_output=True, timeout=timeout)
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-2000:]
    return run.stdout


def png_pixels(path) -> np.ndarray:
    """The RGB pixels of an 8-bit RGB or RGBA PNG (Chromium's screenshots), decoded here."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    channels = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        up = out[y - 1] if y else np.zeros_like(line)
        if kind == 0:
            out[y] = line
        elif kind == 2:
            out[y] = (line + up) % 256
        else:  # 1 (sub), 3 (average), 4 (Paeth) need the pixel to the left: byte by byte
            row = np.zeros_like(line)
            for i in range(len(line)):
                left = row[i - channels] if i >= channels else 0
                corner = up[i - channels] if i >= channels else 0
                if kind == 1:
                    pred = left
                elif kind == 3:
                    pred = (left + up[i]) // 2
                else:
                    p = left + up[i] - corner
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - corner)
                    pred = left if pa <= pb and pa <= pc else (up[i] if pb <= pc else corner)
                row[i] = (line[i] + pred) % 256
            out[y] = row
    return out.reshape(height, width, channels)[:, :, :3].astype(np.uint8)


def pixels_of(pixels: np.ndarray, rgb) -> int:
    return int(np.all(pixels == np.array(rgb, np.uint8), axis=-1).sum())


@pytest.mark.parametrize("optimized", [False, True])
def test_the_html_graph_renders(tmp_path, optimized):
    page = tmp_path / "graph.html"
    run = subprocess.run([*HLOGEN, "graph", SAMPLE, "--function", "newton_sqrt",
                          *(["--optimized"] if optimized else []), "-o", str(page)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    drawn = parse_svg(ET.fromstring(re.search(r"<svg.*</svg>", page.read_text(), re.S).group(0)))
    # the DOM after the page's script ran: every node and edge there, the SVG sized to
    # the window by the script (so it ran without an error)
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", page.as_uri()).decode()
    svg = ET.fromstring(re.search(r"<svg.*</svg>", dom, re.S).group(0))
    shown = parse_svg(svg)
    assert shown["nodes"] == drawn["nodes"] and sorted(shown["edges"]) == sorted(drawn["edges"])
    assert svg.get("width") == "100%" and svg.get("height") == "100%"
    assert any(t.text == "while" or (t.text or "").startswith("while") for t in svg.iter(f"{SVG}text"))
    # the screenshot: node boxes painted in their colours, the whole graph in the window
    shot = tmp_path / "graph.png"
    chromium("--window-size=1200,900", "--virtual-time-budget=5000", f"--screenshot={shot}",
             page.as_uri())
    pixels = png_pixels(shot)
    assert pixels.shape == (900, 1200, 3)
    assert pixels_of(pixels, OP_FILL) > 500 and pixels_of(pixels, PARAMETER_FILL) > 100
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20  # text, lines, boxes: not blank


class DevTools:
    """Headless Chromium driven over its DevTools protocol (a websocket, spoken here: the
    venv has no websocket client), for pages that load in steps: navigate, wait for a
    condition in the page, screenshot."""

    def __init__(self, profile_dir):
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
             "--enable-unsafe-swiftshader", "--use-angle=swiftshader", "--window-size=1400,900",
             "--remote-debugging-port=0", f"--user-data-dir={profile_dir}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.process.stderr:
            if m := re.search(r"DevTools listening on ws://([^/]+)/", line):
                break
        address = m.group(1)
        with urllib.request.urlopen(f"http://{address}/json/list", timeout=30) as f:
            (page,) = [t for t in json.load(f) if t["type"] == "page"]
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        path = page["webSocketDebuggerUrl"].split(address, 1)[1]
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                          f"Sec-WebSocket-Version: 13\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += self.sock.recv(1)
        assert b" 101 " in reply.split(b"\r\n")[0], reply
        self.next_id = 0

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "DevTools closed the connection"
            data += chunk
        return data

    def _message(self) -> dict:
        payload = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload += self._read(length)
            if first & 0x80:  # the last frame of the message
                return json.loads(payload)

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        data = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        size = len(data)
        head = bytes([0x81]) + (bytes([0x80 | size]) if size < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", size) if size < 65536
                                else bytes([0x80 | 127]) + struct.pack(">Q", size))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        while True:
            reply = self._message()
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression,
                         returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            time.sleep(0.5)
        return False

    def screenshot(self, path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        self.sock.close()
        self.process.terminate()
        self.process.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(importlib.util.find_spec("model_explorer") is None,
                    reason="the extra hlogen[view] (Model Explorer) is not installed")
def test_model_explorer_shows_the_module(tmp_path):
    port = _free_port()
    server = subprocess.Popen([*HLOGEN, "view", SAMPLE, "--function", "newton_sqrt",
                               "--port", str(port), "--no-browser"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url, said = None, []
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            assert line or server.poll() is None, "".join(said)
            said.append(line)
            if line.startswith(f"http://localhost:{port}"):
                url = line.strip()
        assert url and "newton_sqrt.mlir" in urllib.request.unquote(url), "".join(said)
        with urllib.request.urlopen(f"http://localhost:{port}/", timeout=30) as page:
            assert page.status == 200
        browser = DevTools(tmp_path / "chromium")
        try:
            browser.call("Page.navigate", url=url)
            # the app converts the module (on the server), lays it out and draws it (WebGL)
            assert browser.wait_for("document.body.innerText.includes('op node count') && "
                                    "document.querySelectorAll('canvas').length > 0", 120), \
                browser.evaluate("document.body.innerText")
            text = browser.evaluate("document.body.innerText")
            shot, drawn, deadline = tmp_path / "explorer.png", 0, time.monotonic() + 60
            while drawn <= 300 and time.monotonic() < deadline:  # until the frames come
                browser.screenshot(shot)
                graph_pane = png_pixels(shot)[150:650, 100:950]  # the graph's labels, edges
                drawn = int((graph_pane.max(axis=-1) < 120).sum())
        finally:
            browser.close()
        assert "newton_sqrt.mlir" in text and re.search(r"main\s+\d+ nodes", text), text
        assert drawn > 300, "Model Explorer's graph pane stayed empty"
    finally:
        server.terminate()
        server.wait(timeout=30)
