"""Screenshots of the HTML report, one per kind, for the docs; and the headless browser
that takes them (the browser test of the HTML report drives the same one).

Usage, from the repository root (needs torch and Debian's ``chromium``)::

    python scripts/screenshots.py   # docs/screenshots/{lint,check,run,ckpt,demo}.png

Each report comes from a real torchdoctor run on the bundled demo script
(``torchdoctor/demo/buggy_train.py``) or on a checkpoint written here. The browser is
driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): no port is
opened, and every request the page makes is recorded, so a caller can check that the
page loaded nothing from the network.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "screenshots"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    """The chromium executable, or ``None`` when none is installed."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _as_fds_3_and_4(reads: int, writes: int) -> None:
    """In the child: put the pipe ends where chromium expects them (via high copies, so
    that neither end is closed by moving the other)."""
    import fcntl

    high_reads = fcntl.fcntl(reads, fcntl.F_DUPFD, 10)
    high_writes = fcntl.fcntl(writes, fcntl.F_DUPFD, 10)
    os.dup2(high_reads, 3)
    os.dup2(high_writes, 4)


@dataclass
class PageLoad:
    """What happened while a page loaded: its requests and its console errors."""

    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Chromium:
    """A headless chromium driven over the DevTools protocol on a pipe.

    Use as a context manager; :meth:`load` opens a page, :meth:`screenshot` takes a PNG
    of the page or of a region of it.
    """

    def __init__(
        self, executable: str, width: int = 1280, height: int = 900, timeout: float = 60.0
    ) -> None:
        self._profile = tempfile.mkdtemp(prefix="torchdoctor-chromium-")
        read_from_browser, browser_writes = os.pipe()
        browser_reads, write_to_browser = os.pipe()
        # The browser reads commands from fd 3 and writes replies to fd 4.
        self._process = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(3, 4),  # kept open after preexec_fn, which moves the pipe there
            preexec_fn=lambda: _as_fds_3_and_4(browser_reads, browser_writes),
        )
        os.close(browser_reads)
        os.close(browser_writes)
        self._in, self._out = read_from_browser, write_to_browser
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._timeout = timeout
        self._session = ""
        self.width = width

    def __enter__(self) -> Chromium:
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # a browser that already went away
            self.call("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._in)
        os.close(self._out)
        if self._process.stderr is not None:
            self._process.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- protocol ---------------------------------------------------------------------

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply (events meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._events.append(reply)

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + self._timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._in], [], [], max(left, 0))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(raw)
        return parsed

    def _wait_for(self, method: str) -> None:
        while not any(e.get("method") == method for e in self._events):
            self._events.append(self._receive())

    # -- pages ------------------------------------------------------------------------

    def load(self, path: Path) -> PageLoad:
        """Open ``path`` and wait for its load event; report requests and console errors."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        self._wait_for("Page.loadEventFired")
        self.call("Runtime.evaluate", session=True, expression="1")  # drain late events
        load = PageLoad()
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                load.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                load.errors.append(str(params["exceptionDetails"].get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                load.errors.append(json.dumps(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                load.errors.append(params["entry"].get("text", ""))
        return load

    def boxes(self, selector: str) -> list[dict[str, float]]:
        """The page boxes (x, y, width, height) of the elements matching ``selector``."""
        script = (
            f"JSON.stringify([...document.querySelectorAll({json.dumps(selector)})]"
            ".map(e => {const r = e.getBoundingClientRect(); return {x: r.x + "
            "window.scrollX, y: r.y + window.scrollY, width: r.width, height: "
            "r.height};}))"
        )
        result = self.call("Runtime.evaluate", session=True, expression=script)
        boxes: list[dict[str, float]] = json.loads(result["result"]["value"])
        return boxes

    def screenshot(
        self, clip: dict[str, float] | None = None, max_height: int | None = None
    ) -> bytes:
        """A PNG of the region ``clip``, or of the whole page (up to ``max_height``)."""
        if clip is None:
            metrics = self.call("Page.getLayoutMetrics", session=True)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            height = size["height"] if max_height is None else min(size["height"], max_height)
            clip = {"x": 0, "y": 0, "width": self.width, "height": height}
        shot = self.call(
            "Page.captureScreenshot",
            session=True,
            format="png",
            captureBeyondViewport=True,
            clip={**clip, "scale": 1},
        )
        return base64.b64decode(shot["data"])


# --- a small PNG reader: enough to count the pixels of a screenshot --------------------------


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGBA/RGB bytes of an 8-bit, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    position, idat, header = 8, b"", b""
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour, interlace = header[8], header[9], header[12]
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError("only 8-bit RGB/RGBA non-interlaced PNGs are read")
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def _unfilter(kind: int, line: bytearray, previous: bytearray, channels: int) -> None:
    if kind == 0:
        return
    for i in range(len(line)):
        left = line[i - channels] if i >= channels else 0
        up = previous[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
        elif kind == 4:
            corner = previous[i - channels] if i >= channels else 0
            estimate = left + up - corner
            pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
            best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + best) & 0xFF
        else:
            raise ValueError(f"unknown PNG filter {kind}")


def ink_fractions(data: bytes) -> tuple[float, float]:
    """The shares of a PNG's pixels that are drawn on (clearly not white) and that are
    coloured (saturated: the plotted lines and marks, not grey axes or black text)."""
    width, height, rows = png_pixels(data)
    channels = len(rows[0]) // width if rows else 3
    inked = coloured = 0
    for row in rows:
        for x in range(0, len(row), channels):
            low, high = min(row[x : x + 3]), max(row[x : x + 3])
            inked += low < 200
            coloured += high - low > 80
    total = max(width * height, 1)
    return inked / total, coloured / total


# --- the docs' screenshots -------------------------------------------------------------------


def _reports() -> dict[str, Any]:
    """One real report of each kind, from the bundled demo script."""
    import torch

    import torchdoctor
    from torchdoctor.ckpt import diagnose
    from torchdoctor.demo import SCRIPT, run_demo

    demo = run_demo(run_steps=60)
    sections = {section.depth.value: section.report for section in demo.sections}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt"
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
        state = {"model": model.state_dict(), "epoch": 3}
        state["model"]["0.weight"][0, 0] = float("nan")
        torch.save(state, path)
        ckpt = diagnose(path)
    return {
        "lint": (torchdoctor.lint([SCRIPT]), "torchdoctor lint buggy_train.py"),
        "check": (sections["check"], "torchdoctor check buggy_train.py:make"),
        "run": (sections["run"], "torchdoctor run --max-steps 60 buggy_train.py"),
        "ckpt": (ckpt, "torchdoctor ckpt model.pt"),
        "demo": (demo.combined, "torchdoctor demo"),
    }


def main() -> int:
    from torchdoctor.report import RenderOptions, render

    executable = find_chromium()
    if executable is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    SHOTS.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parents[1] / "src" / "torchdoctor" / "demo")
    with tempfile.TemporaryDirectory() as folder, Chromium(executable) as browser:
        for kind, (report, title) in _reports().items():
            page = Path(folder) / f"{kind}.html"
            page.write_text(
                render(report, "html", RenderOptions(title=title, root=root)), encoding="utf-8"
            )
            load = browser.load(page)
            remote = [url for url in load.requests if not url.startswith(("file:", "data:"))]
            if remote or load.errors:
                print(f"{kind}: requests {remote}, console errors {load.errors}", file=sys.stderr)
                return 1
            (SHOTS / f"{kind}.png").write_bytes(browser.screenshot(max_height=1800))
            print(f"wrote {SHOTS / f'{kind}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
