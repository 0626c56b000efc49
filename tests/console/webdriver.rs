//! Just enough of the W3C WebDriver protocol to drive headless Chromium
//! through `chromedriver`: a session, navigation, finding and clicking
//! elements, typing, running a script and screenshots. JSON over loopback
//! HTTP.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The key WebDriver gives element references under.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
pub const WAIT: Duration = Duration::from_secs(20);

/// Where `name` is on the PATH, if it is.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The browser and its driver, if both are installed.
pub fn find_browser() -> Option<(PathBuf, PathBuf)> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| which(name))?;
    Some((browser, which("chromedriver")?))
}

/// A running chromedriver and one browser session on it. Dropping it ends
/// both.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    base: String,
    session: String,
}

/// A reference to an element of the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    pub async fn start(binary: &Path, chromedriver: &Path, port: u16) -> Browser {
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            // Its own process group, so the browsers it starts can be
            // killed with it.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            let ready = match http.get(format!("{base}/status")).send().await {
                Ok(answer) => answer.json::<Value>().await.ok(),
                Err(_) => None,
            };
            if ready.is_some_and(|s| s["value"]["ready"] == true) {
                break;
            }
            assert!(started.elapsed() < WAIT, "chromedriver never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut browser = Browser {
            driver,
            http,
            base,
            session: String::new(),
        };
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": binary.display().to_string(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1000"],
            },
        } } });
        let session = browser.raw("POST", "/session", Some(capabilities)).await;
        browser.session = session["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {session}"))
            .to_owned();
        browser
    }

    /// One command; its `value`, or the error WebDriver answered with.
    async fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let answer: Value = request
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("JSON from chromedriver");
        answer["value"].clone()
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let value = self.raw(method, &path, body).await;
        if let Some(error) = value.get("error") {
            panic!("webdriver {method} {path}: {error}: {}", value["message"]);
        }
        value
    }

    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> Option<Element> {
        let path = format!("/session/{}/element", self.session);
        let value = self
            .raw(
                "POST",
                &path,
                Some(json!({ "using": "css selector", "value": css })),
            )
            .await;
        value[ELEMENT].as_str().map(|id| Element(id.to_owned()))
    }

    /// Waits for an element matching `css`.
    pub async fn wait_for(&self, css: &str) -> Element {
        let started = Instant::now();
        loop {
            if let Some(found) = self.find(css).await {
                return found;
            }
            if started.elapsed() > WAIT {
                let page = self.run("return document.body.innerText;").await;
                panic!("no element `{css}` in time; the page shows:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `check` holds of the element matching `css`'s text.
    pub async fn wait_text(&self, css: &str, check: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        let mut last = String::new();
        loop {
            // The page may replace the element between the find and the
            // read: that is a miss, not a failure.
            if let Some(found) = self.find(css).await {
                let path = format!("/session/{}/element/{}/text", self.session, found.0);
                if let Some(text) = self.raw("GET", &path, None).await.as_str() {
                    if check(text) {
                        return text.to_owned();
                    }
                    text.clone_into(&mut last);
                }
            }
            assert!(
                started.elapsed() < WAIT,
                "`{css}` never showed the text wanted; it last showed: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, element: &Element) {
        self.call("POST", &format!("/element/{}/click", element.0), None)
            .await;
    }

    pub async fn type_into(&self, element: &Element, text: &str) {
        self.call(
            "POST",
            &format!("/element/{}/value", element.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Empties a text field, as a user selecting and deleting would.
    pub async fn clear(&self, element: &Element) {
        self.call("POST", &format!("/element/{}/clear", element.0), None)
            .await;
    }

    pub async fn text(&self, element: &Element) -> String {
        self.call("GET", &format!("/element/{}/text", element.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A DOM property of the element (`className`, `disabled`, ...).
    pub async fn property(&self, element: &Element, name: &str) -> Value {
        self.call(
            "GET",
            &format!("/element/{}/property/{name}", element.0),
            None,
        )
        .await
    }

    /// Runs `script` in the page; its return value.
    pub async fn run(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    /// A PNG of the window, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let encoded = self.call("GET", "/screenshot", None).await;
        let png = base64(encoded.as_str().expect("base64 text"));
        std::fs::write(path, png).expect("screenshot written");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Killing the driver alone leaves its browser running (reparented);
        // the whole group goes.
        if let Ok(pid) = i32::try_from(self.driver.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64, as WebDriver sends screenshots.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for quad in clean.chunks(4) {
        let mut bits = 0u32;
        for (i, c) in quad.iter().enumerate() {
            bits |= value(*c) << (18 - 6 * i);
        }
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..quad.len()]);
    }
    out
}
