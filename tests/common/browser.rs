//! Headless Chromium driven over the DevTools protocol (a WebSocket to
//! `--remote-debugging-port`), for the tests of the debugging page. The
//! browser is Debian's `chromium`: installed with apt-get when missing and
//! the test runs as root; [`Browser::launch`] says why when it cannot be had.

use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// A running headless Chromium with one page attached; killed when dropped.
pub struct Browser {
    child: Child,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    /// Every event received so far (method, params), in order.
    pub events: Vec<(String, Value)>,
    _profile: tempfile::TempDir,
}

/// The browser's executable: `chromium` on the system, else installed from
/// Debian's packages.
fn chromium() -> Result<PathBuf, String> {
    let found = || {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    };
    if let Some(path) = found() {
        return Ok(path);
    }
    if !super::python::on_path("apt-get") {
        return Err("chromium is not installed and there is no apt-get".into());
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // (A fresh machine's package lists may be missing: update once, then retry.)
    if !install() {
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        install();
    }
    found().ok_or_else(|| {
        "chromium is not installed and `apt-get install chromium` failed (not root, or offline)"
            .into()
    })
}

impl Browser {
    /// Starts a headless browser (`width`×`height` window) with a page
    /// attached and its network events reported.
    pub fn launch(width: u32, height: u32) -> Result<Browser, String> {
        let exe = chromium()?;
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let child = Command::new(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                // WebGL on the CPU (there is no GPU in CI).
                "--enable-unsafe-swiftshader",
                "--use-angle=swiftshader",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("chromium does not start: {e}"))?;
        let mut child = Some(child);
        let endpoint = match wait_for_endpoint(profile.path()) {
            Ok(endpoint) => endpoint,
            Err(e) => {
                if let Some(mut c) = child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        };
        let (socket, _) = tungstenite::connect(endpoint.as_str())
            .map_err(|e| format!("cannot connect to chromium's DevTools: {e}"))?;
        let mut browser = Browser {
            child: child.take().expect("started"),
            socket,
            session: String::new(),
            next_id: 0,
            events: Vec::new(),
            _profile: profile,
        };
        let target = browser.call_browser("Target.createTarget", json!({"url": "about:blank"}))?;
        let target_id = target["targetId"].as_str().unwrap_or_default().to_owned();
        let attached = browser.call_browser(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )?;
        browser.session = attached["sessionId"]
            .as_str()
            .ok_or("no DevTools session")?
            .to_owned();
        browser.call("Network.enable", json!({}))?;
        browser.call("Page.enable", json!({}))?;
        browser.call("Runtime.enable", json!({}))?;
        Ok(browser)
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.send(None, method, params)
    }

    /// A DevTools command to the page; its result.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let session = self.session.clone();
        self.send(Some(session), method, params)
    }

    fn send(
        &mut self,
        session: Option<String>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            message["sessionId"] = s.into();
        }
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|e| format!("{method}: {e}"))?;
        loop {
            let reply = self.socket.read().map_err(|e| format!("{method}: {e}"))?;
            let Message::Text(text) = reply else { continue };
            let value: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            if value["id"] == json!(id) {
                if let Some(error) = value.get("error") {
                    return Err(format!("{method}: {error}"));
                }
                return Ok(value["result"].clone());
            }
            if let Some(event) = value["method"].as_str() {
                self.events
                    .push((event.to_owned(), value["params"].clone()));
            }
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise); its value.
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(exception) = result.get("exceptionDetails") {
            return Err(format!("{expression}: {exception}"));
        }
        Ok(result["result"]["value"].clone())
    }

    /// Waits (at most `timeout`) until `expression` is truthy in the page
    /// (one that throws, as while the page is still loading, counts as
    /// false).
    pub fn wait_for(&mut self, expression: &str, timeout: Duration) -> Result<Value, String> {
        let started = Instant::now();
        loop {
            let (value, error) = match self.eval(expression) {
                Ok(value) => (value, String::new()),
                Err(e) => (Value::Null, e),
            };
            let falsy = [json!(null), json!(false), json!(""), json!(0)];
            if !falsy.contains(&value) {
                return Ok(value);
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "still false after {timeout:?}: {expression} {error}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` into the element with id `id` (replacing its value), as
    /// keyboard input.
    pub fn type_into(&mut self, id: &str, text: &str) -> Result<(), String> {
        self.eval(&format!(
            "(() => {{ const e = document.getElementById({id:?}); e.focus(); e.select(); return true; }})()"
        ))?;
        self.call("Input.insertText", json!({"text": text}))?;
        Ok(())
    }

    /// A PNG screenshot of the page's viewport.
    pub fn screenshot(&mut self) -> Result<Vec<u8>, String> {
        use base64::Engine;
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}))?;
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .map_err(|e| e.to_string())
    }

    /// The URLs of every request the page sent so far.
    pub fn requested_urls(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|(method, _)| method == "Network.requestWillBeSent")
            .filter_map(|(_, p)| p["request"]["url"].as_str().map(str::to_owned))
            .collect()
    }
}

/// The browser's DevTools WebSocket address, from the `DevToolsActivePort`
/// file it writes into its profile once it listens.
fn wait_for_endpoint(profile: &Path) -> Result<String, String> {
    let file = profile.join("DevToolsActivePort");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(text) = std::fs::read_to_string(&file) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return Ok(format!("ws://127.0.0.1:{port}{path}"));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err("chromium did not open its DevTools port within 20 s".into())
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A decoded screenshot: RGB per pixel, row by row.
pub struct Image {
    pub width: u32,
    pub height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Image {
    pub fn decode(png_bytes: &[u8]) -> Image {
        let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = decoder.read_info().expect("a PNG");
        let mut buf = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut buf).expect("a frame");
        let channels = info.color_type.samples();
        let rgb = buf[..info.buffer_size()]
            .chunks(channels)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        Image {
            width: info.width,
            height: info.height,
            rgb,
        }
    }

    /// The pixels inside `clip` (x, y, width, height).
    fn within(&self, clip: [u32; 4]) -> impl Iterator<Item = (u32, u32, [u8; 3])> + '_ {
        let [x0, y0, w, h] = clip;
        (y0..(y0 + h).min(self.height)).flat_map(move |y| {
            (x0..(x0 + w).min(self.width))
                .map(move |x| (x, y, self.rgb[(y * self.width + x) as usize]))
        })
    }

    /// Pixel statistics inside `clip`: the share of pixels that differ from
    /// `background` by more than a little, and how many distinct colours
    /// (to 4 bits a channel) there are.
    pub fn stats(&self, clip: [u32; 4], background: [u8; 3]) -> (f64, usize) {
        let (mut total, mut differing) = (0usize, 0usize);
        let mut colours = std::collections::HashSet::new();
        for (_, _, p) in self.within(clip) {
            total += 1;
            if differs(p, background) {
                differing += 1;
            }
            colours.insert((p[0] >> 4, p[1] >> 4, p[2] >> 4));
        }
        (differing as f64 / total.max(1) as f64, colours.len())
    }

    /// How many pixels inside `clip` differ from `other`'s.
    pub fn differing(&self, other: &Image, clip: [u32; 4]) -> usize {
        self.within(clip)
            .filter(|&(x, y, p)| differs(p, other.rgb[(y * other.width + x) as usize]))
            .count()
    }
}

fn differs(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(b).any(|(x, y)| x.abs_diff(y) > 12)
}
