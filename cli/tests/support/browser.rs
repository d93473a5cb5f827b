//! A real browser for the tests: Debian's `chromium`, headless, driven over WebDriver by
//! `chromedriver` (package `chromium-driver`), which the test starts on a free loopback
//! port and kills when the browser is dropped. Missing either is a test failure that says
//! what to install, never a skip. Screenshots go to `<target>/screenshots/`. Only the
//! browser tests include it (`#[path = "support/browser.rs"] mod browser;`), so the other
//! test binaries do not link a WebDriver client.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};

use crate::support::{wait_until, KillOnDrop};

/// A program on `PATH`, or a failure saying which package has it.
fn program(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not on PATH; the browser tests need it: `apt-get install {package}` (scripts/test installs it in CI)"
            )
        })
}

pub struct Browser {
    pub client: Client,
    _driver: KillOnDrop,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless chromium session in it.
    pub async fn start() -> Browser {
        let chromium = program("chromium", "chromium");
        let chromedriver = program("chromedriver", "chromium-driver");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = KillOnDrop(
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts"),
        );
        wait_until(
            Duration::from_secs(60),
            "chromedriver to listen",
            || async move {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .ok()
                    .map(|_| ())
            },
        )
        .await;
        let mut capabilities = Capabilities::new();
        capabilities.insert(
            "goog:chromeOptions".to_string(),
            json!({
                "binary": chromium,
                // Tests run as root in CI, where chromium's sandbox cannot start.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1200,1000",
                         "--hide-scrollbars", "--allow-file-access-from-files"],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a chromium session through chromedriver");
        Browser {
            client,
            _driver: driver,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Runs `script` (a function body; `return` gives its value) in the page.
    pub async fn js(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.unwrap()
    }

    /// Polls `script` until it returns something other than `null` or `false`.
    pub async fn wait_for(&self, timeout: Duration, what: &str, script: &str) -> Value {
        wait_until(timeout, what, || async {
            let value = self.js(script).await;
            (!matches!(value, Value::Null | Value::Bool(false))).then_some(value)
        })
        .await
    }

    /// A screenshot of the whole page (the window is made as tall as the document first),
    /// saved as `<target>/screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let height = self
            .js("return Math.ceil(document.documentElement.scrollHeight);")
            .await
            .as_u64()
            .unwrap_or(1000)
            .clamp(600, 8000) as u32;
        self.client
            .set_window_size(1200, height + 120)
            .await
            .unwrap();
        let png = self.client.screenshot().await.unwrap();
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, &png).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
        path
    }

    pub async fn close(self) {
        let _ = self.client.close().await;
    }
}

/// `<target>/screenshots`, next to the tests' own temporary directory.
pub fn screenshots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target tmp dir has a parent")
        .join("screenshots")
}

/// `file://` URL of a local file.
pub fn file_url(path: &Path) -> String {
    format!("file://{}", path.canonicalize().unwrap().display())
}
